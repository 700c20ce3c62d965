// The shared PostgreSQL of the cross-adapter tests: a small pool, and a fresh schema per test so
// tests never see each other's rows (dropped when the test's scope closes).
import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import * as PgMigrations from "@effect-outbox/adapter-pg/PgMigrations"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"

export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** A small pool: several test files share one server with `max_connections = 100`. */
export const pgClient = (maxConnections = 4) =>
  PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections, applicationName: "effect-outbox-integration-test" })

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
