# Sourced by .ci/run and scripts/dev: makes Node >= 22 and the pinned pnpm available (installing
# Node 24 and pnpm from the npm registry into a cache dir when missing), then installs the
# workspace's dependencies.
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
