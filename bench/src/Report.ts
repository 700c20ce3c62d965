/**
 * The results: one row per measured variant with the library figure, the baseline figure from
 * the same repetitions, their ratio (median and range of the per-repetition ratios) and CPU.
 * Written to bench/results.json and bench/results.md, and printed.
 */
import { writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import type { CpuUse } from "./Cpu.ts"
import { fmt, fmtSpread, type Spread, spread } from "./Stats.ts"

export interface Row {
  readonly scenario: string
  readonly variant: string
  readonly unit: string
  readonly library: Spread
  readonly baseline?: Spread | undefined
  readonly baselineName?: string | undefined
  /** library ÷ baseline per repetition (for latencies: library − baseline, see `ratioKind`). */
  readonly ratio?: Spread | undefined
  readonly ratioKind?: "ratio" | "difference" | undefined
  readonly target?: string | undefined
  readonly met?: boolean | undefined
  readonly cpu?: { readonly library?: CpuUse | undefined; readonly baseline?: CpuUse | undefined } | undefined
  readonly note?: string | undefined
}

const rows: Array<Row> = []
const extras: Record<string, unknown> = {}

export const add = (row: Row): void => {
  rows.push(row)
  console.log(`  → ${line(row)}`)
}

export const extra = (key: string, value: unknown): void => {
  extras[key] = value
}

/** Per-repetition pairs → a row with ratio spread. */
export const pair = (
  base: Omit<Row, "library" | "baseline" | "ratio">,
  library: ReadonlyArray<number>,
  baseline: ReadonlyArray<number> | undefined,
  kind: "ratio" | "difference" = "ratio"
): Row => {
  const ratios =
    baseline === undefined ? undefined : library.map((l, i) => (kind === "ratio" ? l / baseline[i]! : l - baseline[i]!))
  return {
    ...base,
    library: spread(library),
    baseline: baseline === undefined ? undefined : spread(baseline),
    ratio: ratios === undefined ? undefined : spread(ratios),
    ratioKind: kind
  }
}

const avgCpu = (cs: ReadonlyArray<CpuUse>): CpuUse | undefined =>
  cs.length === 0
    ? undefined
    : {
        node: cs.reduce((s, c) => s + c.node, 0) / cs.length,
        postgres: cs.reduce((s, c) => s + c.postgres, 0) / cs.length,
        kafka: cs.reduce((s, c) => s + c.kafka, 0) / cs.length
      }

export { avgCpu }

const pct = (c: CpuUse | undefined) =>
  c === undefined ? "–" : `${Math.round(c.node * 100)}/${Math.round(c.postgres * 100)}/${Math.round(c.kafka * 100)}`

const digitsFor = (unit: string) => (unit === "ms" ? 1 : 0)

const line = (r: Row): string =>
  `${r.scenario} ${r.variant}: ${fmtSpread(r.library, digitsFor(r.unit))} ${r.unit}` +
  (r.baseline ? ` vs ${r.baselineName ?? "baseline"} ${fmtSpread(r.baseline, digitsFor(r.unit))}` : "") +
  (r.ratio
    ? ` → ${r.ratioKind === "difference" ? "Δ" : "×"}${fmtSpread(r.ratio, r.ratioKind === "difference" ? 1 : 2)}`
    : "") +
  (r.target ? ` [target ${r.target}: ${r.met === undefined ? "?" : r.met ? "met" : "MISSED"}]` : "")

export const markdown = (): string => {
  const out: Array<string> = []
  out.push(
    "| scenario | variant | library | baseline | ratio (median, min–max) | target | CPU lib node/pg/kafka % | CPU base node/pg/kafka % |"
  )
  out.push("|---|---|---|---|---|---|---|---|")
  for (const r of rows) {
    const d = digitsFor(r.unit)
    out.push(
      [
        r.scenario,
        r.variant + (r.note ? ` (${r.note})` : ""),
        `${fmtSpread(r.library, d)} ${r.unit}`,
        r.baseline ? `${r.baselineName ?? ""} ${fmtSpread(r.baseline, d)} ${r.unit}` : "–",
        r.ratio
          ? `${r.ratioKind === "difference" ? "+" : "×"}${fmtSpread(r.ratio, r.ratioKind === "difference" ? 1 : 2)}${r.ratioKind === "difference" ? " ms" : ""}`
          : "–",
        r.target ? `${r.target} ${r.met === undefined ? "" : r.met ? "✅" : "❌ missed"}` : "",
        pct(r.cpu?.library),
        pct(r.cpu?.baseline)
      ]
        .join(" | ")
        .replace(/^/, "| ")
        .replace(/$/, " |")
    )
  }
  return out.join("\n")
}

export const write = (path: string, meta: Record<string, unknown>): string => {
  const md = markdown()
  const header = [
    `# effect-outbox benchmark run ${new Date().toISOString()}`,
    "",
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, load average at end ${loadavg()
      .map((l) => fmt(l, 2))
      .join(" ")}`,
    `settings: ${JSON.stringify(meta)}`,
    ""
  ].join("\n")
  writeFileSync(
    `${path}/results.json`,
    JSON.stringify(
      { meta: { ...meta, finishedAt: new Date().toISOString(), loadavg: loadavg() }, rows, extras },
      null,
      2
    )
  )
  writeFileSync(`${path}/results.md`, `${header}\n${md}\n`)
  return md
}
