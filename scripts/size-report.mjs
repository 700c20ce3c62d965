#!/usr/bin/env node
// `pnpm size`: the largest source files under packages/*/src and their longest functions, and a
// non-zero exit when a file is over 450 lines or a function over 120 (STYLE.md: small files,
// one concept each). Functions are found with the TypeScript compiler's own parser (the
// `typescript/unstable/sync` API of TypeScript 7, which the repo installs), so the spans are
// the real function-like nodes: declarations, expressions, arrows, methods, accessors.
//
//   node scripts/size-report.mjs [--top N]
//   SIZE_REPORT_ENFORCE=0 node scripts/size-report.mjs   report only, exit 0
//
// `pnpm size` then runs scripts/headers.mjs: a file cannot get under the limit by losing its header.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { SyntaxKind } from "typescript/unstable/ast"
import { API } from "typescript/unstable/sync"

const MAX_FILE_LINES = 450
const MAX_FUNCTION_LINES = 120
const root = resolve(import.meta.dirname, "..")
const topArg = process.argv.indexOf("--top")
const top = topArg === -1 ? 15 : Number(process.argv[topArg + 1])
const enforce = process.env.SIZE_REPORT_ENFORCE !== "0"

const sources = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sources(path)
    return /\.(c|m)?tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path] : []
  })

const files = readdirSync(join(root, "packages"))
  .map((pkg) => join(root, "packages", pkg, "src"))
  .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory())
  .flatMap(sources)
  .sort()

const lineCount = (text) => text.split("\n").length - (text.endsWith("\n") ? 1 : 0)

const functionKinds = new Set([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor
])

const namedKinds = new Set([
  ...functionKinds,
  SyntaxKind.VariableDeclaration,
  SyntaxKind.PropertyAssignment,
  SyntaxKind.PropertyDeclaration,
  SyntaxKind.ClassDeclaration
])

/**
 * The name a reader would look for: the declaration's own, else the binding it is assigned to,
 * else `outer › inner` for a callback inside a named one.
 */
const nameOf = (node) => {
  for (let at = node; at !== undefined && at.kind !== SyntaxKind.SourceFile; at = at.parent) {
    const name = namedKinds.has(at.kind) ? at.name?.text : undefined
    if (name !== undefined) return at === node || at === node.parent ? name : `${name} › inner`
  }
  return "(anonymous)"
}

// Parse only: a throwaway project of exactly these files, no lib, no module resolution.
const scratch = mkdtempSync(join(tmpdir(), "size-report-"))
const functions = []
const fileSizes = []
try {
  const config = join(scratch, "tsconfig.json")
  writeFileSync(
    config,
    JSON.stringify({
      compilerOptions: { noResolve: true, noLib: true, types: [], allowImportingTsExtensions: true, noEmit: true },
      files
    })
  )
  const api = new API({ cwd: root })
  try {
    const project = api.updateSnapshot({ openProjects: [config] }).getProjects()[0]
    for (const file of files) {
      const text = readFileSync(file, "utf8")
      const path = relative(root, file)
      fileSizes.push({ path, lines: lineCount(text) })
      const source = project.program.getSourceFile(file)
      if (source === undefined) throw new Error(`the parser did not load ${path}`)
      const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1
      const visit = (node, enclosing) => {
        let inner = enclosing
        if (functionKinds.has(node.kind)) {
          const start = lineOf(node.getStart(source))
          const end = lineOf(node.getEnd())
          // `make = () => Effect.gen(function* () {…})` is one function to a reader: a function
          // that holds 90% of its enclosing one's lines is counted as that one.
          const same = enclosing !== undefined && end - start + 1 >= 0.9 * enclosing.lines
          if (!same) {
            inner = { path, name: nameOf(node), start, end, lines: end - start + 1 }
            functions.push(inner)
          }
        }
        node.forEachChild((child) => visit(child, inner))
      }
      source.forEachChild((child) => visit(child, undefined))
    }
  } finally {
    api.close()
  }
} finally {
  rmSync(scratch, { recursive: true, force: true })
}

const table = (title, rows, columns) => {
  console.log(`\n${title}`)
  const widths = columns.map(([header, get]) => Math.max(header.length, ...rows.map((r) => String(get(r)).length)))
  const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join("  ")
  console.log(line(columns.map(([header]) => header)))
  console.log(line(widths.map((w) => "-".repeat(w))))
  for (const row of rows) console.log(line(columns.map(([, get]) => get(row))))
}
const mark = (over) => (over ? "OVER" : "")

const bigFiles = [...fileSizes].sort((a, b) => b.lines - a.lines)
const longFunctions = [...functions].sort((a, b) => b.lines - a.lines)
table(`Largest source files under packages/*/src (limit ${MAX_FILE_LINES} lines)`, bigFiles.slice(0, top), [
  ["lines", (r) => r.lines],
  ["file", (r) => r.path],
  ["", (r) => mark(r.lines > MAX_FILE_LINES)]
])
table(`Longest functions (limit ${MAX_FUNCTION_LINES} lines)`, longFunctions.slice(0, top), [
  ["lines", (r) => r.lines],
  ["function", (r) => r.name],
  ["where", (r) => `${r.path}:${r.start}-${r.end}`],
  ["", (r) => mark(r.lines > MAX_FUNCTION_LINES)]
])

const overFiles = bigFiles.filter((r) => r.lines > MAX_FILE_LINES)
const overFunctions = longFunctions.filter((r) => r.lines > MAX_FUNCTION_LINES)
const violations = overFiles.length + overFunctions.length
console.log(
  `\n${files.length} files, ${functions.length} functions: ${overFiles.length} file(s) over ${MAX_FILE_LINES} lines, ` +
    `${overFunctions.length} function(s) over ${MAX_FUNCTION_LINES} lines`
)
if (violations > 0) {
  for (const r of overFiles) console.log(`  file      ${r.path} (${r.lines} lines)`)
  for (const r of overFunctions) console.log(`  function  ${r.name} ${r.path}:${r.start}-${r.end} (${r.lines} lines)`)
  if (enforce) {
    console.log("size: FAILED (SIZE_REPORT_ENFORCE=0 reports without failing)")
    process.exit(1)
  }
  console.log("size: over the limits, not enforced (SIZE_REPORT_ENFORCE=0)")
}
