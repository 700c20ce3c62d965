// The log slot's gauges without the lease, on a wal_level=logical PostgreSQL (LOGICAL_DATABASE_URL):
// any process samples them, so an alert on retained WAL fires while no relay reads the slot.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import { LogSource } from "@effect-outbox/core/LogSource"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgLogGauges from "../src/PgLogGauges.ts"
import * as PgLogSource from "../src/PgLogSource.ts"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"

const url = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })

describe("PgLogGauges", () => {
  it.live("samples a slot no relay reads: lag, retained WAL, wal_status; a missing slot is a typed error", () =>
    Effect.gen(function* () {
      const slot = `gauges_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      const schema = slot
      const sql = yield* SqlClient.SqlClient
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
      // As the setup step does: the migrations (the event table the publication names), then the slot.
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      yield* PgLogSource.ensureSlot({ slot, schema })
      yield* Effect.addFinalizer(() => PgLogSource.dropSlot({ slot, schema }).pipe(Effect.ignore))
      // WAL the slot has to keep: nothing reads it.
      yield* sql.unsafe(`SELECT pg_logical_emit_message(false, 'gauges-test', repeat('x', 100000))::text AS lsn`)
      const gauges = yield* PgLogGauges.sample(slot)
      assert.isAbove(gauges.lagBytes, 100_000)
      assert.isAbove(gauges.retainedBytes, 100_000)
      assert.strictEqual(gauges.walStatus, "reserved")
      const missing = yield* Effect.flip(PgLogGauges.sample(`${slot}_none`))
      assert.match(missing.message, /is missing/)

      // The relay's sampler, with no relay holding the slot (a source whose lease is never free).
      const source = Layer.succeed(LogSource)(LogSource.of({ acquire: Effect.succeed(Option.none()) }))
      const layer = PgLogGauges.layer({ slot }).pipe(
        Layer.provide(source),
        Layer.provide(Layer.succeed(SqlClient.SqlClient)(sql))
      )
      const sampler = yield* Effect.forkChild(
        LogRelay.sampleGauges({ gaugeInterval: Duration.millis(20) }).pipe(Effect.provide(layer))
      )
      yield* Effect.sleep(Duration.millis(300))
      yield* Fiber.interrupt(sampler)
      assert.isAbove((yield* Metric.value(Telemetry.logRetainedWal)).value, 100_000)
      assert.strictEqual((yield* Metric.value(LogRelay.slotWalStatus)).value, 0)
    }).pipe(Effect.scoped, Effect.provide(client))
  )
})
