// Shared by the integration tests: the real PostgreSQL, and a fresh schema per test so tests never
// see each other's rows. The schema is dropped when the test's scope closes.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as Tracer from "effect/Tracer"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"

export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** A small pool: several helpers share one server with `max_connections = 100`. */
export const pgClient = (maxConnections = 4) =>
  PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections, applicationName: "effect-outbox-adapter-pg-test" })

export const freshSchema = () => `t_${randomUUID().replaceAll("-", "").slice(0, 24)}`

/** Tables in a fresh, migrated schema that is dropped with the layer. */
export const freshTables = (options: Omit<PgTables.Options, "schema"> = {}) =>
  Layer.effect(PgTables.PgTables)(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const tables = yield* PgTables.make({ ...options, schema: freshSchema() })
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${tables.schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables))
      return tables
    }).pipe(Effect.orDie)
  )

/**
 * A tracer that records what effect/sql does: every `sql.transaction` span (one per
 * `withTransaction`, outermost or nested: a nested one is a SAVEPOINT) and every statement text.
 */
export const recordingTracer = () => {
  const spans: Array<string> = []
  const statements: Array<string> = []
  class Recorded extends Tracer.NativeSpan {
    override attribute(key: string, value: unknown) {
      if (key === "db.query.text") statements.push(String(value))
      super.attribute(key, value)
    }
  }
  const tracer = Tracer.make({
    span: (options) => {
      spans.push(options.name)
      return new Recorded(options)
    }
  })
  return { tracer, spans, statements, transactions: () => spans.filter((name) => name === "sql.transaction").length }
}
