// The all-in-one layer configured from the environment.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutbox from "../src/PgOutbox.ts"
import { PgTables } from "../src/PgTables.ts"
import { databaseUrl, freshSchema } from "./support.ts"

describe("PgOutbox.layerConfig", () => {
  it.effect("reads DATABASE_URL, schema and prefix, migrates, and serves the ports", () => {
    const schema = freshSchema()
    const env = ConfigProvider.layer(
      ConfigProvider.fromEnvRecord({
        DATABASE_URL: databaseUrl,
        DATABASE_MAX_CONNECTIONS: "3",
        OUTBOX_SCHEMA: schema,
        OUTBOX_TABLE_PREFIX: "evt_",
        OUTBOX_LISTEN: "false"
      })
    )
    return Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
      assert.strictEqual(t.message, `"${schema}"."evt_message"`)
      assert.strictEqual(t.channel, `${schema}_evt_wakeup`)
      const store = yield* OutboxStore
      const id = randomUUID() as EventId
      yield* store.insert([
        {
          id,
          topic: "t",
          key: null,
          partition: null,
          headers: {},
          payload: new Uint8Array(0),
          status: "PENDING",
          availableAt: 0,
          createdAt: 0
        }
      ])
      assert.isTrue(Option.isSome(yield* store.get(id)))
    }).pipe(Effect.scoped, Effect.provide(PgOutbox.layerConfig.pipe(Layer.provide(env))))
  })
})
