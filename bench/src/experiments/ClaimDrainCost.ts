/**
 * What-if (not part of `pnpm bench`): the claim's PostgreSQL cost over one drain, without a relay:
 * claim 100 (`EXPLAIN (ANALYZE, BUFFERS)` of the claim function), mark the batch PUBLISHED, commit,
 * until the backlog is gone; buffers and time per claim by stage of the drain.
 *
 *   node bench/src/experiments/ClaimDrainCost.ts [--backlog 20000] [--vacuum-every 0] [--claims N] [--keep]
 */
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"

const backlog = Args.number("backlog", 20_000)
const vacuumEvery = Args.number("vacuum-every", 0)
const maxClaims = Args.number("claims", Number.POSITIVE_INFINITY)
const keep = Args.flag("keep")
const loadBefore = Cpu.loadAverage()
const stack = await Library.makeStack({ schema: Env.uniqueName("bench_claimcost"), pgConnections: 2, sink: "none" })
await Library.fillBacklog(stack, "claim-cost", backlog)

interface Plan {
  readonly "Execution Time": number
  readonly Plan: { readonly "Shared Hit Blocks": number; readonly "Shared Read Blocks": number }
}

const claimOnce = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables.PgTables
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      const rows = yield* sql.unsafe<{ "QUERY PLAN": ReadonlyArray<Plan> }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
             SELECT * FROM ${t.claimFunction}('probe', 100, 1000, now(), 30000, true)`
      ).withoutTransform
      const plan = rows[0]!["QUERY PLAN"][0]!
      const marked = yield* sql.unsafe<{ n: number }>(
        `WITH m AS (UPDATE ${t.message} SET status = 'PUBLISHED', published_partition = 0,
                published_offset = 0, published_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                updated_at = now()
              WHERE status = 'DISPATCHING' AND lease_owner = 'probe' RETURNING 1)
           SELECT count(*)::int AS n FROM m`
      ).withoutTransform
      return {
        ms: plan["Execution Time"],
        buffers: plan.Plan["Shared Hit Blocks"] + plan.Plan["Shared Read Blocks"],
        rows: marked[0]!.n
      }
    })
  )
})

const vacuum = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables.PgTables
  yield* sql.unsafe(`VACUUM ${t.message}`).unprepared
})

const samples: Array<{ ms: number; buffers: number; rows: number }> = []
for (let i = 0; i < maxClaims; i++) {
  const s = await stack.run(claimOnce)
  if (s.rows === 0) break
  samples.push(s)
  if (vacuumEvery > 0 && (i + 1) % vacuumEvery === 0) await stack.run(vacuum)
}
const tenth = Math.max(1, Math.floor(samples.length / 10))
console.log(`backlog ${backlog}, vacuum every ${vacuumEvery || "never"}; claims ${samples.length}`)
console.log("| claims | rows done before | mean ms | mean buffers |")
console.log("|---|---|---|---|")
for (let i = 0; i < samples.length; i += tenth) {
  const part = samples.slice(i, i + tenth)
  const mean = (f: (s: (typeof part)[number]) => number) => part.reduce((a, s) => a + f(s), 0) / part.length
  console.log(
    `| ${i + 1}–${i + part.length} | ${samples.slice(0, i).reduce((a, s) => a + s.rows, 0)} | ${mean((s) => s.ms).toFixed(2)} | ${Math.round(mean((s) => s.buffers))} |`
  )
}
console.log(`load average ${loadBefore} → ${Cpu.loadAverage()}`)
if (keep) console.log(`kept schema ${stack.schema}`)
else await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
