// Writes docs/configuration.md from the variable tables every package declares (EnvVariable.table),
// or with --check fails when the page is stale or when a source file reads a variable no table
// declares. `pnpm config:docs` writes; `pnpm config:docs --check` is what CI runs.
//
//   node scripts/config-docs.ts [--check] [--file <path>]
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
// Loading each package registers its tables.
import "../packages/core/src/index.ts"
import "../packages/adapter-pg/src/index.ts"
import "../packages/adapter-kafka/src/index.ts"
import "../packages/adapter-kafka-platformatic/src/index.ts"
import "../packages/cli/src/Cli.ts"
import "../packages/schema-registry/src/index.ts"
import * as EnvVariable from "../packages/core/src/EnvVariable.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const args = process.argv.slice(2)
const check = args.includes("--check")
const fileAt = args.indexOf("--file")
const file = fileAt >= 0 ? args[fileAt + 1]! : join(root, "docs", "configuration.md")

const problems: Array<string> = []
const tables = EnvVariable.tables()
const names = tables.flatMap((t) => t.variables.map((v) => v.name))
for (const name of new Set(names)) {
  if (names.filter((n) => n === name).length > 1) problems.push(`${name} is declared in more than one table`)
}

// A variable of ours (`OUTBOX_*`, `KAFKA_*`, `DATABASE_*`) read directly (`Config.Int("OUTBOX_X")`)
// must be declared in a table too, so the page lists it. The test harness (packages/testing) reads its own variables and is not listed.
const known = new Set(names)
const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry)
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : []
  })
for (const pkg of readdirSync(join(root, "packages"))) {
  if (pkg === "testing") continue
  for (const path of sources(join(root, "packages", pkg, "src"))) {
    const text = readFileSync(path, "utf8")
    for (const match of text.matchAll(/Config\.\w+\(\s*(?:\[[^\]]*\],\s*)?"((?:OUTBOX|KAFKA|DATABASE)_[A-Z0-9_]*)"/g)) {
      if (!known.has(match[1]!)) {
        problems.push(`${relative(root, path)} reads ${match[1]} but no EnvVariable.table declares it`)
      }
    }
  }
}

const page = EnvVariable.markdown(tables)
if (check) {
  let current = ""
  try {
    current = readFileSync(file, "utf8")
  } catch {
    // missing: stale
  }
  if (current !== page) problems.push(`${relative(root, file)} is stale: run pnpm config:docs and commit it`)
} else if (problems.length === 0) {
  writeFileSync(file, page)
  console.log(`wrote ${relative(root, file)}: ${names.length} variables in ${tables.length} sections`)
}
if (problems.length > 0) {
  for (const problem of problems) console.error(problem)
  process.exit(1)
}
