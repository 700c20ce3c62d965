/**
 * What-if (not part of `pnpm bench`): the relay drain with the claim function as committed vs.
 * with a LIMIT on its candidate loop, at two backlog sizes, on a no-Kafka sink. Shows that the
 * committed claim reads every PENDING row (seq scan + sort per claim). See docs/performance.md.
 *
 *   node bench/src/experiments/ClaimLimit.ts
 */

import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
// The experiment measures adapter-pg's private statements: it reaches them by path, since the
// package's exports map hides internal/ from every consumer.
import { claimFunction } from "../../../packages/adapter-pg/src/internal/sql.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"

const schema = Env.uniqueName("bench_fix")
const watcher = await Library.makeStack({ schema, pgConnections: 2 })
const relay = await Library.makeStack({ schema, pgConnections: 3, sink: "none" })
const setFunction = (fixed: boolean) =>
  watcher.run(
    Library.Effect.gen(function* () {
      const sql = yield* Library.SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      let text = claimFunction(t)
      if (fixed)
        text = text.replace(
          "ORDER BY m.available_at, m.seq LOOP",
          "ORDER BY m.available_at, m.seq LIMIT LEAST(p_limit, 100000) * 20 + 1000 LOOP"
        )
      if (fixed && !text.includes("LIMIT LEAST(p_limit, 100000) * 20 + 1000 LOOP")) throw new Error("patch failed")
      yield* sql.unsafe(text).unprepared
    })
  )
for (const n of [10000, 40000])
  for (const fixed of [false, true]) {
    await setFunction(fixed)
    await Library.truncate(watcher)
    await Library.fillBacklog(watcher, "bench-fix", n)
    const p = Library.emptyProfile()
    const t0 = performance.now()
    const stop = await Library.startRelay(relay, { batchSize: 100, pollMillis: 50 }, p)
    while ((await Library.unpublished(watcher)) > 0) await Env.sleep(20)
    console.log(
      `backlog ${n} ${fixed ? "LIMIT in the candidate loop" : "as committed"}: ${Math.round((n / (performance.now() - t0)) * 1000)}/s; claim ${(p.claim / p.batches).toFixed(1)} ms, mark ${(p.mark / p.batches).toFixed(1)} ms`
    )
    await stop()
  }
await Library.dropSchema(watcher)
await relay.dispose()
await watcher.dispose()
process.exit(0)
