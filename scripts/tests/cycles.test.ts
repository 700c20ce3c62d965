// `pnpm cycles` finds an import cycle between two modules of one package, type-only imports and
// the package's own `@scope/pkg/Module` imports included, names its modules and exits 1; a
// package without one passes.
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const script = fileURLToPath(new URL("../cycles.mjs", import.meta.url))
const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A repository with one package, `@x/p`, holding `files` under its src/. */
const repo = (files: Record<string, string>) => {
  const root = mkdtempSync(join(tmpdir(), "cycles-test-"))
  dirs.push(root)
  mkdirSync(join(root, "packages/p/src"), { recursive: true })
  writeFileSync(join(root, "packages/p/package.json"), JSON.stringify({ name: "@x/p" }))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, "packages/p/src", path)), { recursive: true })
    writeFileSync(join(root, "packages/p/src", path), text)
  }
  return spawnSync(process.execPath, [script, root], { encoding: "utf8" })
}

describe("scripts/cycles.mjs", () => {
  it("a public module and the internal one that imports its types back form a cycle", () => {
    const run = repo({
      "Public.ts": 'import * as Engine from "./internal/engine.ts"\nexport type Plan = Engine.Plan\n',
      "internal/engine.ts":
        'import type { Fault } from "../Public.ts"\nexport interface Plan { readonly fault: Fault }\n',
      "Other.ts": 'import * as Public from "./Public.ts"\nexport const x = Public\n'
    })
    expect(run.status).toBe(1)
    expect(run.stdout).toContain("import cycle in @x/p")
    expect(run.stdout).toContain("packages/p/src/Public.ts")
    expect(run.stdout).toContain("packages/p/src/internal/engine.ts")
    expect(run.stdout).not.toContain("Other.ts")
  })

  it("an import through the package's own name counts", () => {
    const run = repo({
      "A.ts": 'import { b } from "@x/p/B"\nexport const a = () => b\n',
      "B.ts": 'export { a } from "./A.ts"\nexport const b = 1\n'
    })
    expect(run.status).toBe(1)
    expect(run.stdout).toContain("packages/p/src/A.ts")
  })

  it("types defined where the engine is and re-exported publicly: no cycle", () => {
    const run = repo({
      "Public.ts": 'import * as Engine from "./internal/engine.ts"\nexport type Plan = Engine.Plan\n',
      "internal/engine.ts": 'export type Fault = "lost"\nexport interface Plan { readonly fault: Fault }\n'
    })
    expect(run.status).toBe(0)
    expect(run.stdout).toContain("no import cycle")
  })
})
