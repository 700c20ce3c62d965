/**
 * The lifecycle registry on PostgreSQL: the core `LifecycleRegistry` port over
 * `<prefix>lifecycle_group` (migration `7_lifecycle_group`), one row per topic. `register` is one
 * upsert that only touches a row the same group holds, so two processes of different groups
 * starting at once cannot both win.
 *
 * @since 0.1.0
 */
import { LifecycleGroupConflictError, type StoreError } from "@effect-outbox/core/Errors"
import { LifecycleRegistry, type Registration } from "@effect-outbox/core/LifecycleRegistry"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { run } from "./internal/errors.ts"
import { PgTables } from "./PgTables.ts"

interface Row {
  readonly topic: string
  readonly group_id: string
  readonly registered_at: string
  readonly started_at: string
}

const registration = (r: Row): Registration => ({
  topic: r.topic,
  group: r.group_id,
  registeredAt: Number(r.registered_at),
  startedAt: Number(r.started_at)
})

const columns = `topic, group_id,
  (extract(epoch FROM registered_at) * 1000)::bigint::text AS registered_at,
  (extract(epoch FROM started_at) * 1000)::bigint::text AS started_at`

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const table = sql.literal(t.lifecycleGroup)
  const select = sql.literal(columns)
  // Inserts, or refreshes the row the same group holds; no row back means another group holds it.
  const upsert = (topic: string, group: string) =>
    sql<Row>`INSERT INTO ${table} AS r (topic, group_id) VALUES (${topic}::text, ${group}::text)
      ON CONFLICT (topic) DO UPDATE SET started_at = now() WHERE r.group_id = EXCLUDED.group_id
      RETURNING ${select}`.withoutTransform.pipe(run("lifecycle.register"))
  const holder = (topic: string) =>
    sql<Row>`SELECT ${select} FROM ${table} WHERE topic = ${topic}::text`.withoutTransform.pipe(
      run("lifecycle.register")
    )
  const register = (
    topic: string,
    group: string,
    tries: number
  ): Effect.Effect<Registration, LifecycleGroupConflictError | StoreError> =>
    Effect.gen(function* () {
      const [taken] = yield* upsert(topic, group)
      if (taken !== undefined) return registration(taken)
      const [held] = yield* holder(topic)
      // released between the two statements: try again
      if (held === undefined && tries > 0) return yield* register(topic, group, tries - 1)
      const registered = held?.group_id ?? "unknown"
      return yield* new LifecycleGroupConflictError({ topic, groups: [registered, group].sort(), registered })
    })
  return LifecycleRegistry.of({
    register: (topic, group) => register(topic, group, 3),
    list: (filter = {}) =>
      sql<Row>`SELECT ${select} FROM ${table}
         WHERE (${filter.topic ?? null}::text IS NULL OR topic = ${filter.topic ?? null}::text)
           AND (${filter.group ?? null}::text IS NULL OR group_id = ${filter.group ?? null}::text)
         ORDER BY topic`.withoutTransform.pipe(
        Effect.map((rows) => rows.map(registration)),
        run("lifecycle.list")
      ),
    release: (topic, group) =>
      sql`DELETE FROM ${table} WHERE topic = ${topic}::text AND group_id = ${group}::text RETURNING topic`.withoutTransform.pipe(
        Effect.map((rows) => rows.length > 0),
        run("lifecycle.release")
      )
  })
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<LifecycleRegistry, never, SqlClient.SqlClient | PgTables> =
  Layer.effect(LifecycleRegistry)(make)
