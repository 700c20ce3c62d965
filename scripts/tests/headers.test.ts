// `pnpm size` fails when a public module lost its module doc comment: a real run of
// scripts/headers.mjs over a scratch repository, and over this one.
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const script = join(root, "scripts/headers.mjs")
const scratch = mkdtempSync(join(tmpdir(), "headers-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const header = "/**\n * What this module holds.\n *\n * @since 0.1.0\n */\n"
const body = "export const answer = 42\n"

/** A scratch repository holding `files` (path → text), checked by a real run of the script. */
const check = (name: string, files: Record<string, string>) => {
  const repo = join(scratch, name)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, path)), { recursive: true })
    writeFileSync(join(repo, path), text)
  }
  const run = spawnSync(process.execPath, [script, repo], { encoding: "utf8" })
  return { status: run.status, output: run.stdout + run.stderr }
}

describe("scripts/headers.mjs", () => {
  it("passes when every public module opens with a doc comment carrying @since", () => {
    const run = check("all-headed", {
      "packages/core/src/Relay.ts": header + body,
      "packages/core/src/index.ts": `${header}export * as Relay from "./Relay.ts"\n`,
      "packages/cli/src/main.ts": `#!/usr/bin/env node\n${header}${body}`,
      "packages/cli/src/commands/Root.ts": header + body
    })
    expect(run.output).toContain("4 public modules: 0 without a module header")
    expect(run.status).toBe(0)
  })

  it("fails on a module whose header was deleted, naming it", () => {
    const run = check("headerless", {
      "packages/core/src/Relay.ts": header + body,
      "packages/adapter-kafka/src/KafkaPublisher.ts": `import * as Effect from "effect/Effect"\n${body}`
    })
    expect(run.status).toBe(1)
    expect(run.output).toContain("2 public modules: 1 without a module header")
    expect(run.output).toContain(
      `${join("packages", "adapter-kafka", "src", "KafkaPublisher.ts")}: does not open with a /** module doc comment */`
    )
    expect(run.output).not.toContain("Relay.ts")
  })

  it("fails on a header without @since, on an empty one, and on a plain comment or code before it", () => {
    const run = check("incomplete", {
      "packages/core/src/NoSince.ts": `/**\n * What this module holds.\n */\n${body}`,
      "packages/core/src/Empty.ts": `/**\n * @since 0.1.0\n */\n${body}`,
      "packages/core/src/LineComment.ts": `// What this module holds.\n${header}${body}`,
      "packages/core/src/CodeFirst.ts": `${body}${header}`
    })
    expect(run.status).toBe(1)
    expect(run.output).toContain("4 public modules: 4 without a module header")
    expect(run.output).toContain("NoSince.ts: its module doc comment has no @since tag")
    expect(run.output).toContain("Empty.ts: its module doc comment says nothing")
    expect(run.output).toContain("LineComment.ts: does not open with a /** module doc comment */")
    expect(run.output).toContain("CodeFirst.ts: does not open with a /** module doc comment */")
  })

  it("leaves internal modules, tests and declaration files alone", () => {
    const run = check("internal", {
      "packages/core/src/Relay.ts": header + body,
      "packages/core/src/internal/relay/failure.ts": body,
      "packages/core/src/types.d.ts": "declare const x: number\n",
      "packages/core/test/Relay.test.ts": body
    })
    expect(run.output).toContain("1 public modules: 0 without a module header")
    expect(run.status).toBe(0)
  })

  it("this repository's public modules all have their header", () => {
    const run = spawnSync(process.execPath, [script], { encoding: "utf8" })
    expect(run.stdout).toContain(" 0 without a module header")
    expect(run.status).toBe(0)
  })

  it("fails on a @since later than the package's version, internal modules included", () => {
    const run = check("future-since", {
      "packages/core/package.json": JSON.stringify({ name: "core", version: "0.1.0" }),
      "packages/core/src/Relay.ts": header + body,
      "packages/core/src/internal/loop.ts": "/** @since 0.5.0 */\nexport const x = 1\n"
    })
    expect(run.output).toContain("packages/core/src/internal/loop.ts: @since 0.5.0 is later than the package's 0.1.0")
    expect(run.status).toBe(1)
  })
})
