/**
 * Self time of a V8 `.cpuprofile` summed per function and per package, as shares of the samples.
 *
 *   node bench/src/experiments/cpuProfileSummary.ts <file.cpuprofile> [--top 40]
 */
import { readFileSync } from "node:fs"
import * as Args from "../Args.ts"

interface Node {
  readonly id: number
  readonly callFrame: { functionName: string; url: string; lineNumber: number }
  readonly children?: ReadonlyArray<number>
}
const file = process.argv[2]!
const top = Args.number("top", 40)
const profile = JSON.parse(readFileSync(file, "utf8")) as { nodes: Array<Node>; samples: Array<number> }
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const counts = new Map<number, number>()
for (const s of profile.samples) counts.set(s, (counts.get(s) ?? 0) + 1)
const total = profile.samples.length
const pkg = (url: string) => {
  const m = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (m) return m[1]!
  if (url.includes("/packages/")) return url.replace(/.*\/packages\//, "")
  return url === "" ? "(native)" : url.replace(/.*\//, "")
}
const fns = new Map<string, number>()
const pkgs = new Map<string, number>()
for (const [id, n] of counts) {
  const f = byId.get(id)!.callFrame
  const name = `${f.functionName || "(anon)"} ${pkg(f.url)}:${f.lineNumber + 1}`
  fns.set(name, (fns.get(name) ?? 0) + n)
  const p = f.url.includes("/packages/") ? `ours ${pkg(f.url).split("/")[0]}` : pkg(f.url)
  pkgs.set(p, (pkgs.get(p) ?? 0) + n)
}
const pct = (n: number) => `${((n / total) * 100).toFixed(1)}%`
console.log(`samples ${total}`)
for (const [k, v] of [...pkgs].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${pct(v).padStart(6)}  ${k}`)
console.log("---")
for (const [k, v] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v).padStart(6)}  ${k}`)

// Attribution: each sample to the nearest frame up its stack that is not native or node's own
// (buffer, streams, timers), so that a Buffer copy counts for the library that asked for it.
const parent = new Map<number, number>()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const internal = (url: string) => url === "" || url.startsWith("node:") || !url.includes("/")
const owner = new Map<string, number>()
const inclusive = new Map<string, number>()
for (const [id, n] of counts) {
  const f0 = byId.get(id)!.callFrame
  if (f0.functionName === "(idle)") continue
  let cur: number | undefined = id
  while (cur !== undefined && internal(byId.get(cur)!.callFrame.url)) cur = parent.get(cur)
  const url = cur === undefined ? "" : byId.get(cur)!.callFrame.url
  const key = cur === undefined ? `(unattributed) ${f0.functionName}` : url.includes("/packages/") ? pkg(url) : pkg(url)
  owner.set(key, (owner.get(key) ?? 0) + n)
  // Inclusive per our own function (each counted once per sample).
  const seen = new Set<string>()
  for (let c: number | undefined = id; c !== undefined; c = parent.get(c)) {
    const f = byId.get(c)!.callFrame
    if (!f.url.includes("/packages/")) continue
    const name = `${f.functionName || "(anon)"} ${pkg(f.url)}:${f.lineNumber + 1}`
    if (seen.has(name)) continue
    seen.add(name)
    inclusive.set(name, (inclusive.get(name) ?? 0) + n)
  }
}
console.log("--- non-idle samples by nearest non-internal frame (file)")
for (const [k, v] of [...owner].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v).padStart(6)}  ${k}`)
console.log("--- inclusive, our functions")
for (const [k, v] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${pct(v).padStart(6)}  ${k}`)
