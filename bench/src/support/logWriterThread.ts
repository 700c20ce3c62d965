/**
 * The latency benches' writer on a worker thread of its own (its own heap and GC, as a service
 * whose relay runs in another process): commits `rate` events/s for `seconds`, one transaction
 * every 10 ms, through `Outbox.enqueue` on PgLogOutbox's writer, and posts each transaction's ids
 * with the time its commit returned. workerData: { slot, topic, rate, seconds, synchronousCommit }.
 */
import { parentPort, workerData } from "node:worker_threads"
import { PgClient } from "@effect/sql-pg"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import * as LogOutbox from "@effect-outbox/core/LogOutbox"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Env from "../Env.ts"
import * as LogStack from "./logStack.ts"

interface Data {
  readonly slot: string
  readonly topic: string
  readonly rate: number
  readonly seconds: number
  readonly synchronousCommit: "on" | "off" | undefined
}
const { slot, topic, rate, seconds, synchronousCommit } = workerData as Data

const client = PgClient.layer({
  url: Redacted.make(LogStack.logicalUrl),
  maxConnections: 4,
  ...(synchronousCommit === undefined ? {} : { startupParameters: { synchronous_commit: synchronousCommit } })
})
const runtime = ManagedRuntime.make(
  LogOutbox.layerWith({ maxRecordBytes: 1_000_000 }).pipe(
    Layer.provideMerge(Layer.mergeAll(PgLogSource.layerWriter({ slot }), PgTransactor.layer)),
    Layer.provideMerge(client)
  )
)

parentPort!.once("message", async () => {
  await Env.commitAtRate(
    rate,
    seconds,
    (from, n) => runtime.runPromise(LogStack.enqueueCommitted(topic, from, n)),
    (committed) => parentPort!.postMessage(committed)
  )
  await runtime.dispose()
  parentPort!.postMessage({ done: true })
})
// Built before the start signal, so connecting is not inside the measurement.
await runtime.runPromise(LogStack.ready)
parentPort!.postMessage({ ready: true })
