/**
 * The claim check's store in PostgreSQL: payloads over the threshold go to
 * `<schema>.<prefix>claimed_payload`, written in the enqueueing transaction (the `SqlClient` joins
 * it) and deleted with their event's outbox row when retention purges it. For the claim engine
 * (`PgOutbox`): the log engine keeps no outbox rows to hang the payloads on.
 *
 * ```ts
 * const layer = PgClaimCheck.layerConfig.pipe(Layer.provideMerge(PgOutbox.layerConfig))
 * ```
 *
 * @since 0.1.0
 */
import * as ClaimCheck from "@effect-outbox/core/ClaimCheck"
import type * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { claimedPayloadTable } from "./internal/claimedPayload.ts"
import { run } from "./internal/errors.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Payloads larger than this many bytes are stored aside (default 262,144). */
  readonly thresholdBytes?: number | undefined
}

/**
 * The store, on the outbox's tables and connection pool.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const table = sql.literal(claimedPayloadTable(yield* PgTables))
    return ClaimCheck.ClaimCheckStore.of({
      thresholdBytes: Math.max(0, options.thresholdBytes ?? 262_144),
      put: (reference, payload) =>
        sql`INSERT INTO ${table} (event_id, payload) VALUES (${reference}::uuid, ${payload})`.withoutTransform.pipe(
          Effect.asVoid,
          run("claim_check.put")
        ),
      get: (reference) =>
        sql<{ payload: Uint8Array }>`SELECT payload FROM ${table}
          WHERE event_id = ${reference}::uuid`.withoutTransform.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => new Uint8Array(row.payload))),
          run("claim_check.get")
        )
    })
  })

/**
 * The store as a layer (migrations run by `PgOutbox`'s layer create its table).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<ClaimCheck.ClaimCheckStore, never, SqlClient.SqlClient | PgTables> =>
  Layer.effect(ClaimCheck.ClaimCheckStore, make(options))

/**
 * {@link layer} with the threshold from `OUTBOX_CLAIM_CHECK_BYTES`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<ClaimCheck.ClaimCheckStore, Config.ConfigError, SqlClient.SqlClient | PgTables> =
  Layer.unwrap(
    Effect.gen(function* () {
      return layer({ thresholdBytes: yield* ClaimCheck.thresholdConfig })
    })
  )
