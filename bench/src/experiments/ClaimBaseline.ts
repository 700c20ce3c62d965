/**
 * What-if (not part of `pnpm bench`): the claim relay against its own limit.
 * The same backlog of 1 KB rows (1000 keys) is drained, in alternating rounds, by
 *   bare     a bare claim + mark loop: `UPDATE … SET status = 'DISPATCHING' WHERE id IN (SELECT id
 *            … WHERE status = 'PENDING' ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING *`,
 *            then one batched mark to PUBLISHED; no per-key rule, no lease check;
 *   relay    the library's claim relay (core `Relay`, the claim function, the fast mark) on the
 *            no-Kafka sink, batch 100, maxPerKey 100;
 *   relay1   the same with `pipelineDepth: 1` (one batch in flight);
 *   fn       the claim function called in a loop with the same batched mark as `bare` (the
 *            relay's own overhead over its two statements);
 * with per-batch claim / mark times, so the cost can be placed. Repeated; report the ratios.
 *
 *   node bench/src/experiments/ClaimBaseline.ts [--backlog 20000] [--reps 3]
 */
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"

const BACKLOG = Args.number("backlog", 20_000)
const REPS = Args.number("reps", 3)
// A relay that never finishes fails the run after this long instead of hanging it.
const DRAIN_SECONDS = Args.number("drain-seconds", 300)
const BATCH = 100

const schema = Env.uniqueName("bench_claimbase")
const stack = await Library.makeStack({ schema, pgConnections: 3, sink: "none", wake: "poll" })
const topic = "bench-claim-baseline"

interface Sample {
  rate: number
  claimMs: number
  markMs: number
}

/** `claim` returns ids; the loop marks them PUBLISHED in one statement, until nothing is left. */
const loop = (
  claim: (
    sql: Library.SqlClient.SqlClient,
    message: string
  ) => Library.Effect.Effect<ReadonlyArray<{ id: string }>, unknown>
) =>
  stack.run(
    Library.Effect.gen(function* () {
      const sql = yield* Library.SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      let rows = 0,
        batches = 0,
        claimMs = 0,
        markMs = 0
      const started = performance.now()
      for (;;) {
        const t0 = performance.now()
        const claimed = yield* claim(sql, t.message)
        const t1 = performance.now()
        if (claimed.length === 0) break
        yield* sql.unsafe(
          `UPDATE ${t.message} SET status = 'PUBLISHED', published_at = now(), updated_at = now(),
             lease_owner = NULL, lease_expires_at = NULL, published_partition = 0, published_offset = 0
           WHERE id = ANY ($1::uuid[]) AND status = 'DISPATCHING'`,
          [claimed.map((r) => r.id)]
        )
        markMs += performance.now() - t1
        claimMs += t1 - t0
        rows += claimed.length
        batches++
      }
      return {
        rate: (rows / (performance.now() - started)) * 1000,
        claimMs: claimMs / batches,
        markMs: markMs / batches
      }
    })
  )

const bare = (): Promise<Sample> =>
  loop((sql, message) =>
    sql.unsafe<{ id: string }>(
      `UPDATE ${message} SET status = 'DISPATCHING', lease_owner = 'bare', lease_expires_at = now() + interval '60 seconds',
              updated_at = now()
        WHERE id IN (SELECT id FROM ${message} WHERE status = 'PENDING' ORDER BY seq LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
       RETURNING *`
    )
  )

const tables = await stack.run(
  Library.Effect.gen(function* () {
    return yield* PgTables.PgTables
  })
)

const fn = (): Promise<Sample> =>
  loop((sql) =>
    sql.unsafe<{ id: string }>(
      `SELECT * FROM ${tables.claimFunction}('fn', ${BATCH}, ${BATCH}, now(), 60000::int8, true)`
    )
  )

const relayWith = (pipelineDepth?: number) => async (): Promise<Sample> => {
  const p = Library.emptyProfile()
  const t0 = performance.now()
  const stop = await Library.startRelay(
    stack,
    { batchSize: BATCH, pollMillis: 20, ...(pipelineDepth === undefined ? {} : { pipelineDepth }) },
    p
  )
  // Done is counted from the relay's own marks, with no query while it drains: a count over the
  // outbox, even every 250 ms, took PostgreSQL time (19 ms a count at 20,000 rows) from the relay
  // that the loops of `bare` and `fn` (which end when a claim comes back empty) never pay. The
  // table is asked once afterwards, to be sure nothing is left.
  const deadline = performance.now() + DRAIN_SECONDS * 1000
  const overdue = (what: string) => {
    if (performance.now() > deadline) {
      throw new Error(`the relay did not drain the backlog within ${DRAIN_SECONDS} s (${what}): see --drain-seconds`)
    }
  }
  while (p.rows < BACKLOG) {
    overdue(`${p.rows} of ${BACKLOG} rows marked`)
    await Env.sleep(5)
  }
  for (let left = await Library.unpublished(stack); left > 0; left = await Library.unpublished(stack)) {
    overdue(`${left} rows still unpublished`)
    await Env.sleep(250)
  }
  const rate = (BACKLOG / (p.lastMarkAt - t0)) * 1000
  await stop()
  return { rate, claimMs: p.claim / p.batches, markMs: (p.publish + p.mark) / p.batches }
}

const sides = { bare, relay: relayWith(), relay1: relayWith(1), fn } as const
type Side = keyof typeof sides
const results = new Map<Side, Array<Sample>>()
console.log(
  `claim baseline: backlog ${BACKLOG} x 1 KB, batch ${BATCH}, ${REPS} reps; load average ${Cpu.loadAverage()}`
)
for (let rep = 0; rep < REPS; rep++) {
  const order: ReadonlyArray<Side> =
    rep % 2 === 0 ? ["bare", "relay", "relay1", "fn"] : ["relay1", "fn", "bare", "relay"]
  for (const side of order) {
    await Library.truncate(stack)
    await Library.fillBacklog(stack, topic, BACKLOG)
    const s = await sides[side]()
    results.set(side, [...(results.get(side) ?? []), s])
    console.log(
      `  rep ${rep + 1} ${side}: ${Math.round(s.rate)} rows/s; claim ${s.claimMs.toFixed(1)} ms, mark ${s.markMs.toFixed(1)} ms per batch`
    )
  }
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const bareRates = results.get("bare")!.map((s) => s.rate)
for (const side of ["relay", "relay1", "fn"] as const) {
  const ratios = results.get(side)!.map((s, i) => s.rate / bareRates[i]!)
  console.log(`${side} / bare: median ×${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(", ")})`)
}
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
