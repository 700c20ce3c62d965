/**
 * Processed-message records on PostgreSQL: the core `InboxStore` port over `<prefix>processed`.
 *
 * `record` is `INSERT … ON CONFLICT (consumer, identity) DO NOTHING RETURNING`: a conflict on
 * exactly the processed key is `"duplicate"` and, unlike a raised unique violation, leaves the
 * caller's transaction usable (a raised error would abort it). Any other failure is an error.
 * A concurrent transaction holding the same key makes `record` wait for it: `"duplicate"` if it
 * commits, `"recorded"` if it rolls back.
 *
 * @since 0.1.0
 */
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { run } from "./internal/errors.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const processed = sql.literal(t.processed)
  return InboxStore.of({
    record: (key, now) =>
      sql<{ recorded: number }>`INSERT INTO ${processed} (consumer, identity, processed_at)
        VALUES (${key.consumer}::text, ${key.identity}::text, ${PgTypes.timestamptz(now)})
        ON CONFLICT (consumer, identity) DO NOTHING
        RETURNING 1 AS recorded`.withoutTransform.pipe(
        Effect.map((rows) => rows.length === 1 ? "recorded" as const : "duplicate" as const),
        run("inbox.record")
      ),
    exists: (key) =>
      sql<{ found: number }>`SELECT 1 AS found FROM ${processed}
        WHERE consumer = ${key.consumer}::text AND identity = ${key.identity}::text`.withoutTransform.pipe(
        Effect.map((rows) => rows.length > 0),
        run("inbox.exists")
      ),
    purge: (olderThan, limit) =>
      limit <= 0
        ? Effect.succeed(0)
        : sql<{ n: number }>`WITH victims AS (
              SELECT consumer, identity FROM ${processed}
               WHERE processed_at < ${PgTypes.timestamptz(olderThan)}
               ORDER BY processed_at
               LIMIT ${Math.trunc(limit)}
                 FOR UPDATE SKIP LOCKED
            ), deleted AS (
              DELETE FROM ${processed} p USING victims v
               WHERE p.consumer = v.consumer AND p.identity = v.identity
              RETURNING 1
            )
            SELECT count(*)::int AS n FROM deleted`.withoutTransform.pipe(
          Effect.map(([row]) => row!.n),
          run("inbox.purge")
        )
  })
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<InboxStore, never, SqlClient.SqlClient | PgTables> = Layer.effect(InboxStore)(make)
