// The one-line result of a test run, "N passed, N failed[, N skipped]", used by scripts/test and
// .ci/run. Counts failed tests AND failed files (a file that throws at import has no test to fail)
// AND a run that failed with nothing counted (an unhandled error, a report that was never written):
// any failure prints "N failed" with N >= 1.
//   node scripts/summary.mjs [--exit CODE] REPORT.json [REPORT.json...]
// Each report is vitest's JSON report (or the same shape: numPassedTests, numFailedTests,
// testResults[].status / .assertionResults). --exit is the runs' combined exit status; a report
// that does not exist is skipped (a stage that did not run) unless it is the only one.
import { existsSync, readFileSync } from "node:fs"
import { pathToFileURL } from "node:url"

/** Counts one vitest JSON report. */
export const count = (report) => {
  const files = report.testResults ?? []
  // A file that failed without a failed test in it: an import error, a failing hook, a crash.
  const failedFiles = files.filter(
    (file) => file.status === "failed" && !(file.assertionResults ?? []).some((test) => test.status === "failed")
  ).length
  return {
    passed: report.numPassedTests ?? 0,
    failed: (report.numFailedTests ?? 0) + failedFiles,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
  }
}

/** The summary line of some reports and the runs' exit status. */
export const summarize = (reports, exitCode = 0) => {
  const total = { passed: 0, failed: 0, skipped: 0 }
  for (const report of reports) {
    const c = count(report)
    total.passed += c.passed
    total.failed += c.failed
    total.skipped += c.skipped
  }
  // The run failed and no report says why (unhandled error, crash before the report): one failure.
  if (exitCode !== 0 && total.failed === 0) total.failed = 1
  const skipped = total.skipped ? `, ${total.skipped} skipped` : ""
  return `${total.passed} passed, ${total.failed} failed${skipped}`
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2)
  let exitCode = 0
  const paths = []
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--exit") exitCode = Number(args[++i] ?? 1) || 0
    else paths.push(args[i])
  }
  const reports = []
  for (const path of paths) {
    if (!existsSync(path)) continue
    try {
      reports.push(JSON.parse(readFileSync(path, "utf8")))
    } catch {
      reports.push({ numFailedTests: 1 }) // a truncated report is a failed run
    }
  }
  console.log(summarize(reports, reports.length === 0 && exitCode === 0 && paths.length > 0 ? 1 : exitCode))
}
