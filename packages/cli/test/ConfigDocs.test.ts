// docs/configuration.md is generated from the variable tables; the check CI runs fails when the
// page is stale (a variable added, renamed or re-defaulted without regenerating it).

import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const script = join(root, "scripts", "config-docs.ts")

const check = (...args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, [script, "--check", ...args], { cwd: root }, (error, _stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stderr })
    )
  })

describe("docs/configuration.md", () => {
  it("is what the variable tables generate, and every variable read is declared", async () => {
    const result = await check()
    assert.strictEqual(result.code, 0, result.stderr)
    const page = readFileSync(join(root, "docs", "configuration.md"), "utf8")
    for (const name of ["OUTBOX_SCHEMA", "OUTBOX_RELAY_BATCH_SIZE", "KAFKA_BROKERS", "DATABASE_URL"]) {
      assert.include(page, `| \`${name}\` |`)
    }
  }, 60_000)

  it("a stale page fails the check, naming the file and the command that fixes it", async () => {
    const stale = join(mkdtempSync(join(tmpdir(), "config-docs-")), "configuration.md")
    const page = readFileSync(join(root, "docs", "configuration.md"), "utf8")
    writeFileSync(
      stale,
      page.replace("| `OUTBOX_RELAY_BATCH_SIZE` | integer | `100` |", "| `OUTBOX_RELAY_BATCH_SIZE` | integer | `50` |")
    )
    const result = await check("--file", stale)
    assert.strictEqual(result.code, 1)
    assert.include(result.stderr, "configuration.md is stale: run pnpm config:docs")
  }, 60_000)
})
