/**
 * Everything the log engine needs on PostgreSQL, in one layer: `Outbox` (enqueue writes logical
 * messages in the ambient transaction), `Transactor`, and the slot's `LogSource` for the relay
 * (`LogRelay.run`). Building it creates the slot and its publication when missing.
 *
 * ```ts
 * const layer = PgLogOutbox.layer({ slot: "orders_outbox" }).pipe(Layer.provideMerge(PgClient.layer({ url })))
 * ```
 *
 * @since 0.3.0
 */
import * as LogOutbox from "@effect-outbox/core/LogOutbox"
import type { LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import type { LogWriter } from "@effect-outbox/core/LogWriter"
import type { Outbox, Settings } from "@effect-outbox/core/Outbox"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import * as PgLogFence from "./PgLogFence.ts"
import * as PgLogGauges from "./PgLogGauges.ts"
import * as PgLogProgress from "./PgLogProgress.ts"
import * as PgLogQuarantine from "./PgLogQuarantine.ts"
import * as PgLogSource from "./PgLogSource.ts"
import * as PgTransactor from "./PgTransactor.ts"

/**
 * @since 0.3.0
 * @category models
 */
export interface Options
  extends PgLogSource.Options,
    PgLogProgress.Options,
    PgLogQuarantine.Options,
    PgLogFence.Options {
  readonly outbox?: Settings | undefined
}

/**
 * @since 0.3.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Outbox | LogSource | LogWriter | Transactor, LogSourceError, SqlClient.SqlClient> =>
  LogOutbox.layerWith(options.outbox).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        PgLogSource.layerWriter(options),
        PgTransactor.layer,
        // Every lease gets the relay's durable progress (a restart's rewound slot is not
        // re-sent), its quarantine (an event refused for good does not stop the others) and a
        // fence (a holder cut off from the server stops publishing); every process samples the
        // slot's gauges, holder or not.
        PgLogQuarantine.layer(options).pipe(
          Layer.provide(PgLogGauges.layer(options)),
          Layer.provide(PgLogFence.layer(options)),
          Layer.provide(PgLogProgress.layer(options)),
          Layer.provide(PgLogSource.layer(options))
        )
      )
    )
  )
