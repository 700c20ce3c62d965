// Every ```ts block of README.md and docs/*.md as its own module, compiled in the outside project
// (scripts/outside-project) the way a user pastes it.
//   node blocks.mjs extract REPO OUT_DIR [EXCLUDED_DOC...]   writes OUT_DIR/<doc>-L<line>.ts + index.json
//   node blocks.mjs report OUT_DIR TSC_OUTPUT REPORT.json    maps tsc's errors to doc file:line
//   node blocks.mjs merge REPORT.json PART.json...           one report of the job's parts
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"

const docsOf = (repo) => [
  "README.md",
  ...readdirSync(join(repo, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`)
]

/** The ```ts blocks of one markdown text: the line of each block's first code line, and its code. */
export const blocksOf = (text) => {
  const lines = text.split("\n")
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```ts\s*$/.test(lines[i])) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++
    blocks.push({ line: start + 1, code: `${lines.slice(start, end).join("\n")}\n` })
    i = end
  }
  return blocks
}

const extract = (repo, out, excluded) => {
  mkdirSync(out, { recursive: true })
  const index = []
  for (const doc of docsOf(repo)) {
    if (excluded.includes(doc)) continue
    for (const block of blocksOf(readFileSync(join(repo, doc), "utf8"))) {
      const file = `${doc.replace(/[/.]/g, "_")}-L${block.line}.ts`
      writeFileSync(join(out, file), block.code)
      index.push({ doc, line: block.line, file })
    }
  }
  writeFileSync(join(out, "index.json"), JSON.stringify(index, null, 2))
  return index
}

// tsc's "path(line,col): error TSxxxx: message" lines (continuation lines indented under them).
const report = (out, tscOutput, reportPath) => {
  const index = JSON.parse(readFileSync(join(out, "index.json"), "utf8"))
  const byFile = new Map(index.map((entry) => [entry.file, { ...entry, errors: [] }]))
  const outside = []
  let last
  for (const line of readFileSync(tscOutput, "utf8").split("\n")) {
    const m = /^(.+?)\((\d+),(\d+)\): error (TS\d+: .*)$/.exec(line)
    if (m) {
      const block = byFile.get(m[1].split("/").pop())
      const where = block ? `${block.doc}:${block.line + Number(m[2]) - 1}:${m[3]}` : `${m[1]}:${m[2]}:${m[3]}`
      last = { where, message: m[4] }
      ;(block ? block.errors : outside).push(last)
    } else if (last && /^\s+\S/.test(line)) {
      last.message += `\n${line}`
    } else if (/error TS\d+/.test(line)) {
      last = { where: "tsc", message: line }
      outside.push(last)
    }
  }
  const results = [...byFile.values()].map((block) => ({
    name: `${block.doc}:${block.line} compiles`,
    status: block.errors.length === 0 ? "passed" : "failed",
    errors: block.errors
  }))
  // Errors outside the blocks (inside a package's .d.ts without skipLibCheck) are failures too.
  if (outside.length > 0) results.push({ name: "package type declarations compile", status: "failed", errors: outside })
  else results.push({ name: "package type declarations compile", status: "passed", errors: [] })
  for (const result of results) {
    console.log(`${result.status === "passed" ? "  ok  " : "  FAIL"} ${result.name}`)
    for (const error of result.errors)
      console.log(`         ${error.where}: ${error.message.replace(/\n/g, "\n         ")}`)
  }
  const failed = results.filter((r) => r.status === "failed").length
  writeFileSync(
    reportPath,
    JSON.stringify(
      {
        numPassedTests: results.length - failed,
        numFailedTests: failed,
        testResults: [
          {
            name: "outside-project: doc blocks",
            status: failed ? "failed" : "passed",
            assertionResults: results.map((r) => ({ title: r.name, status: r.status }))
          }
        ]
      },
      null,
      2
    )
  )
  return failed
}

const [command, ...args] = process.argv.slice(2)
if (command === "extract") {
  const [repo, out, ...excluded] = args
  const index = extract(repo, out, excluded)
  console.log(
    `${index.length} ts blocks from ${new Set(index.map((b) => b.doc)).size} files into ${relative(process.cwd(), out)}`
  )
} else if (command === "report") {
  const [out, tscOutput, reportPath] = args
  process.exitCode = report(out, tscOutput, reportPath) > 0 ? 1 : 0
} else if (command === "merge") {
  const [reportPath, ...parts] = args
  const reports = parts.filter((path) => existsSync(path)).map((path) => JSON.parse(readFileSync(path, "utf8")))
  const sum = (key) => reports.reduce((n, r) => n + (r[key] ?? 0), 0)
  // A part that did not write its report failed.
  const missing = parts.length - reports.length
  writeFileSync(
    reportPath,
    JSON.stringify(
      {
        numPassedTests: sum("numPassedTests"),
        numFailedTests: sum("numFailedTests") + missing,
        testResults: reports.flatMap((r) => r.testResults ?? [])
      },
      null,
      2
    )
  )
} else {
  console.error(
    "usage: blocks.mjs extract REPO OUT [EXCLUDED...] | report OUT TSC_OUTPUT REPORT | merge REPORT PART..."
  )
  process.exitCode = 2
}
