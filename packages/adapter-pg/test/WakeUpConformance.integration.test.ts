// The WakeUp conformance suite on PgWakeUp against the real PostgreSQL (LISTEN/NOTIFY), in both
// modes: after-commit (the default) and NOTIFY inside the transaction. The peer is a second
// PgWakeUp layer on the same tables: another process's relays, reached only through NOTIFY.
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as WakeUpSuite from "@effect-outbox/testing/WakeUpSuite"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PgTransactor from "../src/PgTransactor.ts"
import * as PgWakeUp from "../src/PgWakeUp.ts"
import { freshTables, pgClient } from "./support.ts"

for (const [mode, options] of [
  ["after commit", {}],
  ["NOTIFY in the transaction", { notifyInTransaction: true }]
] as const) {
  WakeUpSuite.suite(`PgWakeUp (${mode})`, {
    layer: () =>
      Layer.mergeAll(PgWakeUp.layer(options), PgTransactor.layer).pipe(
        Layer.provideMerge(freshTables()),
        Layer.provideMerge(pgClient())
      ),
    peer: Effect.map(Layer.build(PgWakeUp.layer(options)), Context.get(WakeUp))
  })
}
