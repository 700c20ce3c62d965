// The dashboard's read-only log page on the real logical PostgreSQL: the slot's state, the relay's
// saved progress and the quarantine, as `log slot` and `log quarantine list` show them.
import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgLogProgress from "@effect-outbox/adapter-pg/PgLogProgress"
import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as Dashboard from "../src/Dashboard.ts"

const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092"

describe("dashboard /log", () => {
  it.live(
    "shows the slot, the relay's progress and the quarantined events; a missing slot is said, not a failure",
    () =>
      Effect.gen(function* () {
        const id = randomUUID().replaceAll("-", "").slice(0, 12)
        const schema = `dash_log_${id}`
        const slot = `dash_log_${id}`
        const services = PgOutbox.layer({ schema, wakeUp: { listen: false } }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 3 })),
          Layer.provideMerge(KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "dashboard-log-test" }))
        )
        const serve = (logSlot: string) =>
          Effect.flatMap(Effect.scope, (scope) =>
            Layer.buildWithScope(Dashboard.layer({ logSlot }).pipe(Layer.provideMerge(services)), scope)
          )
        const context = yield* serve(slot)
        const sql = yield* Effect.service(SqlClient.SqlClient).pipe(Effect.provideContext(context))
        yield* Effect.addFinalizer(() =>
          sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
        )
        const inDb = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
          Effect.provideService(effect, SqlClient.SqlClient, sql)
        yield* inDb(PgLogSource.ensureSlot({ slot, schema }))
        yield* Effect.addFinalizer(() => inDb(PgLogSource.dropSlot({ slot, schema })).pipe(Effect.ignore))
        yield* inDb(Effect.flatMap(PgLogProgress.make({ schema, slot }), (p) => p.save("0/10")))
        const { store } = yield* inDb(PgLogQuarantine.make({ schema, slot }))
        const eventId = randomUUID() as EventId
        yield* inDb(
          store.put([
            {
              message: {
                id: eventId,
                topic: "orders",
                key: "<k>",
                partition: null,
                headers: {},
                payload: new Uint8Array([1]),
                createdAt: Date.now()
              },
              position: "0/10",
              status: "QUARANTINED",
              reason: "the topic does not exist"
            }
          ])
        )
        const get = (url: string) =>
          Effect.promise(async () => {
            const response = await fetch(`${url}/log`)
            return { status: response.status, body: await response.text() }
          })

        const page = yield* get(yield* Dashboard.url().pipe(Effect.provideContext(context)))
        assert.strictEqual(page.status, 200, page.body)
        assert.include(page.body, `slot <b>${slot}</b>: wal_status reserved`)
        assert.include(page.body, "relay progress: 0/10")
        assert.include(page.body, "quarantine: 1 quarantined, 0 held")
        assert.include(page.body, eventId)
        assert.include(page.body, "&lt;k&gt;")
        assert.include(page.body, "the topic does not exist")

        const other = yield* serve(`${slot}_none`)
        const missing = yield* get(yield* Dashboard.url().pipe(Effect.provideContext(other)))
        assert.strictEqual(missing.status, 200, missing.body)
        assert.include(missing.body, "is missing")
      }).pipe(Effect.scoped)
  )
})
