/**
 * What-if (not part of `pnpm bench`): scenario 1 at batch 100 only — one claim relay against raw
 * kafkajs `sendBatch` 100 (interleaved), the no-Kafka sink, and `--relays` relays on one table
 * in this process — with the per-batch stage times and CPU per group.
 *
 *   node bench/src/experiments/ClaimRelay.ts [--backlog 20000] [--reps 3] [--relays 2]
 */
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Report from "../Report.ts"
import * as RelayThroughput from "../scenarios/RelayThroughput.ts"

const loadBefore = Cpu.loadAverage()
await RelayThroughput.run({
  reps: Args.number("reps", 3),
  backlog: Args.number("backlog", 20_000),
  batchSizes: [100],
  relayCounts: [1, ...Args.numbers("relays", "2")]
})
console.log(Report.markdown())
console.log(`load average ${loadBefore} → ${Cpu.loadAverage()}`)
process.exit(0)
