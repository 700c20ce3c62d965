// The roles and grants of docs/log-relay.md ("Roles and grants"), exactly as written there, on the
// private logical PostgreSQL (LOGICAL_DATABASE_URL): the operator sets up and keeps retention,
// the writer enqueues with nothing but INSERT, the relay reads with REPLICATION + SELECT and
// cannot write an event itself.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogRetention from "@effect-outbox/adapter-pg/PgLogRetention"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import { LogSource } from "@effect-outbox/core/LogSource"
import * as Outbox from "@effect-outbox/core/Outbox"
import { readAtLeast } from "@effect-outbox/testing/LogSourceSuite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const as = (role: string) => {
  const url = new URL(Support.logicalDatabaseUrl)
  url.username = role
  return PgClient.layer({ url: Redacted.make(url.toString()), maxConnections: 2 })
}

const admin = as(new URL(Support.logicalDatabaseUrl).username || "postgres")
// The scope closes before the client: a lease's finalizers still have their connection.
const run = <A, E>(
  layer: Layer.Layer<SqlClient.SqlClient, unknown>,
  effect: Effect.Effect<A, E, SqlClient.SqlClient | Scope.Scope>
) => Effect.runPromise(effect.pipe(Effect.scoped, Effect.provide(layer)))
const exec = (text: string) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text))

describe("the log engine's roles and grants", () => {
  it("operator sets up and keeps retention; writer enqueues with INSERT alone; relay reads with REPLICATION + SELECT and cannot insert", async () => {
    const name = Support.uniqueName("grants").toLowerCase()
    const [owner, writer, relay] = [`${name}_owner`, `${name}_writer`, `${name}_relay`]
    const options = { slot: name, schema: name }
    const database = new URL(Support.logicalDatabaseUrl).pathname.slice(1) || "postgres"
    try {
      await run(
        admin,
        Effect.forEach(
          [
            `CREATE ROLE ${owner} LOGIN REPLICATION`,
            `CREATE ROLE ${writer} LOGIN`,
            `CREATE ROLE ${relay} LOGIN REPLICATION`,
            `GRANT CREATE ON DATABASE ${database} TO ${owner}`,
            `CREATE SCHEMA ${name} AUTHORIZATION ${owner}`
          ],
          exec
        )
      )
      // The operator: the setup step, then the grants, as docs/log-relay.md writes them.
      await run(as(owner), PgLogOutbox.setup(options))
      await run(
        as(owner),
        Effect.forEach(
          [
            `GRANT USAGE ON SCHEMA ${name} TO ${writer}, ${relay}`,
            `GRANT INSERT ON ${name}.outbox_log_event TO ${writer}`,
            `GRANT SELECT ON ${name}.outbox_log_event TO ${relay}`
          ],
          exec
        )
      )
      // The writer: the services' layer without setup or retention.
      const ids = await run(
        as(writer),
        Outbox.withTransaction(
          Outbox.enqueue([
            { topic: "orders", key: "a", payload: new Uint8Array([1]) },
            { topic: "orders", key: "b", payload: new Uint8Array([2]) }
          ])
        ).pipe(
          Effect.provide(
            PgLogOutbox.layer({ ...options, setup: false, retention: false }).pipe(Layer.provideMerge(as(writer)))
          )
        )
      )
      // The relay: reads them from the slot over its replication connection, on both transports.
      for (const transport of ["stream", "sql"] as const) {
        const read = await run(
          as(relay),
          Effect.gen(function* () {
            const source = yield* LogSource
            const lease = Option.getOrThrow(yield* source.acquire)
            return yield* readAtLeast(lease, 2)
          }).pipe(Effect.provide(PgLogSource.layer({ ...options, transport })))
        )
        assert.deepStrictEqual(
          read.entries.map((e) => e.id),
          ids,
          transport
        )
        assert.isTrue(
          read.entries.every((e) => e.invalid === undefined),
          transport
        )
      }
      const relayInsert = await run(
        as(relay),
        exec(`INSERT INTO ${name}.outbox_log_event (id, record) VALUES (gen_random_uuid(), '\\x00')`).pipe(
          Effect.flip,
          Effect.map((error) => String(error.reason.cause && (error.reason.cause as { code?: string }).code))
        )
      )
      assert.strictEqual(relayInsert, "42501", "the relay's role cannot write an event")
      const writerRetention = await run(as(writer), PgLogRetention.maintain(options).pipe(Effect.flip))
      assert.match(writerRetention.reason, /42501|must be owner|permission denied/)
      const report = await run(as(owner), PgLogRetention.maintain(options))
      assert.deepStrictEqual(report.dropped, [])
    } finally {
      await run(
        admin,
        Effect.forEach(
          [
            `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${name}'`,
            `DROP PUBLICATION IF EXISTS ${name}`,
            `DROP SCHEMA IF EXISTS ${name} CASCADE`,
            `REVOKE ALL ON DATABASE ${database} FROM ${owner}`,
            `DROP ROLE IF EXISTS ${owner}`,
            `DROP ROLE IF EXISTS ${writer}`,
            `DROP ROLE IF EXISTS ${relay}`
          ],
          (text) => Effect.ignore(exec(text))
        )
      )
    }
  })
})
