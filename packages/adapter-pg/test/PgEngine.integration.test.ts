// OUTBOX_ENGINE on PgOutbox.layerConfig against the shared PostgreSQL (wal_level = replica): the
// claim engine builds as before; the log engine is refused with a message saying what to change.

import { assert, describe, it } from "@effect/vitest"
import { LogSourceError } from "@effect-outbox/core/LogSource"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutbox from "../src/PgOutbox.ts"
import { databaseUrl, freshSchema, pgClient } from "./support.ts"

const env = (values: Record<string, string>) =>
  ConfigProvider.layer(
    ConfigProvider.fromEnv({ env: { DATABASE_URL: databaseUrl, OUTBOX_LISTEN: "false", ...values } })
  )

// The schema is dropped on its own connection: a layer that failed to build has none to offer.
const build = (schema: string, engine: string) =>
  Effect.service(OutboxStore).pipe(
    Effect.scoped,
    Effect.provide(PgOutbox.layerConfig.pipe(Layer.provide(env({ OUTBOX_SCHEMA: schema, OUTBOX_ENGINE: engine })))),
    Effect.exit,
    Effect.ensuring(
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      ).pipe(Effect.provide(pgClient(1)), Effect.ignore)
    )
  )

describe("PgOutbox.layerConfig and OUTBOX_ENGINE", () => {
  it.live("claim builds the stores; log on a server without logical decoding says what it needs", () =>
    Effect.gen(function* () {
      const [walLevel] = yield* Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql<{ wal_level: string }>`SHOW wal_level`
      ).pipe(Effect.provide(pgClient(1)))
      assert.notStrictEqual(walLevel!.wal_level, "logical", "this test needs the shared, non-logical server")

      assert.isTrue(Exit.isSuccess(yield* build(freshSchema(), "claim")))
      const log = yield* build(freshSchema(), "log")
      const error = Exit.isFailure(log) ? Option.getOrUndefined(Cause.findErrorOption(log.cause)) : undefined
      assert.instanceOf(error, LogSourceError)
      assert.include(error.message, "wal_level")
    })
  )
})
