# Sourced by .ci/run and scripts/dev (the one bootstrap of both): makes Node >= 22 and the pinned
# pnpm available (installing Node 24 and pnpm from the npm registry into a cache dir when
# missing), then installs the workspace's dependencies; bootstrap_test_tools (below) adds what
# the tests need besides.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PNPM_VERSION=$(sed -n 's/.*"packageManager": *"pnpm@\([^"]*\)".*/\1/p' "$root/package.json")
TOOLCHAIN=${EFFECT_OUTBOX_TOOLCHAIN:-$HOME/.cache/effect-outbox/toolchain}

_node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ "$(_node_major)" -lt 22 ] || [ "$(pnpm -v 2>/dev/null)" != "$PNPM_VERSION" ]; then
  if [ ! -x "$TOOLCHAIN/node_modules/.bin/node" ] || [ "$("$TOOLCHAIN/node_modules/.bin/pnpm" -v 2>/dev/null)" != "$PNPM_VERSION" ]; then
    echo "[bootstrap] installing Node 24 and pnpm $PNPM_VERSION into $TOOLCHAIN" >&2
    mkdir -p "$TOOLCHAIN"
    npm install --prefix "$TOOLCHAIN" --no-fund --no-audit node@24 "pnpm@$PNPM_VERSION" >&2
  fi
  export PATH="$TOOLCHAIN/node_modules/.bin:$PATH"
fi
echo "[bootstrap] node $(node -v), pnpm $(pnpm -v 2>/dev/null)" >&2

if [ "${BOOTSTRAP_SKIP_INSTALL:-}" != 1 ]; then
  (cd "$root" && pnpm install --frozen-lockfile --reporter=silent >&2)
fi

# What the tests need beyond npm packages, installed when missing (non-interactively, through
# apt-get): Debian's chromium for the dashboard's browser tests (driven by playwright-core, which
# downloads no browser). Called by .ci/run and by `scripts/dev test`; without apt-get (or root /
# passwordless sudo) it says which tests will fail and carries on.
bootstrap_test_tools() {
  command -v chromium >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    local as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
    echo "[bootstrap] installing chromium (apt-get) for the dashboard's browser tests" >&2
    { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2 ||
      echo "[bootstrap] could not install chromium: the dashboard's browser tests will fail" >&2
  else
    echo "[bootstrap] no chromium and no apt-get: the dashboard's browser tests will fail" >&2
  fi
}
