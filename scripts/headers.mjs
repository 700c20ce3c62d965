#!/usr/bin/env node
// `pnpm size`, second check: every public module opens with its module doc comment. A public
// module is a `.ts` file under packages/*/src outside any `internal/` folder (what the packages'
// `exports` maps let a user import). It must start, after an optional `#!` line, with a `/** … */`
// comment that says something and carries `@since <version>`. Without this check the cheapest
// way to bring a file under the size limit is to delete its header.
//
// A `@since` tag anywhere under a package's src may not name a version later than the package's
// own (a tag from a future release says the API is newer than anything published).
//
//   node scripts/headers.mjs [root]   root defaults to the repository; exit 1 on a missing header
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { pathToFileURL } from "node:url"

const sources = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return name === "internal" ? [] : sources(path)
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [path] : []
  })

/** The public modules of every package under `root`, sorted. */
export const publicModules = (root) => {
  const packages = join(root, "packages")
  return readdirSync(packages)
    .map((pkg) => join(packages, pkg, "src"))
    .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory())
    .flatMap(sources)
    .sort()
}

/** What is wrong with a module's opening, or `undefined` when it opens with a proper header. */
export const headerProblem = (text) => {
  const body = text.startsWith("#!") ? text.slice(text.indexOf("\n") + 1) : text
  if (!body.startsWith("/**")) return "does not open with a /** module doc comment */"
  const end = body.indexOf("*/")
  if (end === -1) return "its opening doc comment is not closed"
  const lines = body
    .slice(3, end)
    .split("\n")
    .map((line) => line.replace(/^\s*\*?\s?/, "").trim())
  if (!lines.some((line) => line !== "" && !/^@[A-Za-z]+(\s|$)/.test(line)))
    return "its module doc comment says nothing"
  if (!lines.some((line) => /^@since \d+\.\d+\.\d+$/.test(line))) return "its module doc comment has no @since tag"
  return undefined
}

/** Every public module under `root` whose header is missing or incomplete. */
export const checkHeaders = (root) =>
  publicModules(root).flatMap((file) => {
    const problem = headerProblem(readFileSync(file, "utf8"))
    return problem === undefined ? [] : [{ path: relative(root, file), problem }]
  })

const allSources = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return allSources(path)
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [path] : []
  })

const later = (a, b) => {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number))
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] > y[i]
  return false
}

/** Every `@since` under a package's src later than the package's `version`. */
export const checkSince = (root) => {
  const packages = join(root, "packages")
  return readdirSync(packages).flatMap((pkg) => {
    const src = join(packages, pkg, "src")
    const manifest = join(packages, pkg, "package.json")
    if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) return []
    if (!statSync(manifest, { throwIfNoEntry: false })) return []
    const version = JSON.parse(readFileSync(manifest, "utf8")).version
    if (typeof version !== "string") return []
    return allSources(src).flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/@since (\d+\.\d+\.\d+)/g)]
        .filter((m) => later(m[1], version))
        .map((m) => ({ path: relative(root, file), problem: `@since ${m[1]} is later than the package's ${version}` }))
    )
  })
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const root = resolve(process.argv[2] ?? join(import.meta.dirname, ".."))
  const modules = publicModules(root).length
  const missing = checkHeaders(root)
  console.log(`\n${modules} public modules: ${missing.length} without a module header (/** … @since x.y.z */)`)
  for (const r of missing) console.log(`  ${r.path}: ${r.problem}`)
  const future = checkSince(root)
  console.log(`${future.length} @since tags later than their package's version`)
  for (const r of future) console.log(`  ${r.path}: ${r.problem}`)
  if (missing.length > 0 || future.length > 0) {
    console.log("headers: FAILED")
    process.exit(1)
  }
}
