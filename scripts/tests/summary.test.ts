// The summary line of scripts/test and .ci/run counts failed files and errors, not only failed
// tests: a real vitest run of a file that throws at import must print "1 failed".
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const fixture = fileURLToPath(new URL("fixture-failing-import", import.meta.url))
const summaryScript = join(root, "scripts/summary.mjs")
const dir = mkdtempSync(join(tmpdir(), "summary-test-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const summary = (...args: Array<string>) => {
  const run = spawnSync(process.execPath, [summaryScript, ...args], { encoding: "utf8" })
  expect(run.status).toBe(0)
  return run.stdout.trim()
}

describe("scripts/summary.mjs", () => {
  it("a file that throws at import makes the line say 1 failed (a real vitest run)", () => {
    const report = join(dir, "report.json")
    const run = spawnSync(
      join(root, "node_modules/.bin/vitest"),
      ["run", "--root", fixture, "--reporter=json", `--outputFile.json=${report}`],
      { encoding: "utf8", cwd: fixture, env: { ...process.env, CI: "1" } }
    )
    expect(run.status).not.toBe(0)
    expect(summary("--exit", String(run.status), report)).toBe("1 passed, 1 failed")
  }, 60_000)

  it("a failed run with nothing counted (an unhandled error) is 1 failed", () => {
    const report = join(dir, "green.json")
    writeFileSync(report, JSON.stringify({ numPassedTests: 3, numFailedTests: 0, testResults: [] }))
    expect(summary("--exit", "0", report)).toBe("3 passed, 0 failed")
    expect(summary("--exit", "1", report)).toBe("3 passed, 1 failed")
  })

  it("sums several reports, skips a stage that did not run, and a run without a report fails", () => {
    const a = join(dir, "a.json")
    const b = join(dir, "b.json")
    writeFileSync(a, JSON.stringify({ numPassedTests: 2, numFailedTests: 1, numPendingTests: 1, testResults: [] }))
    writeFileSync(b, JSON.stringify({ numPassedTests: 5, numFailedTests: 0, testResults: [] }))
    expect(summary("--exit", "1", a, b, join(dir, "absent.json"))).toBe("7 passed, 1 failed, 1 skipped")
    expect(summary("--exit", "1", join(dir, "absent.json"))).toBe("0 passed, 1 failed")
  })
})
