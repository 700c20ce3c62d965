/**
 * `InboxStore` over the in-memory engine, with PostgreSQL's rule: a record is kept by its time
 * (`InboxStore.recordTime`) in spans of one day, its key is the consumer, the identity and that
 * time, and `purge` forgets whole spans only, raising the horizon below which keys are
 * `"expired"`.
 *
 * @internal
 */

import type { InboxStore } from "@effect-outbox/core/InboxStore"
import { keyTime, type ProcessedKey, type RecordOutcome } from "@effect-outbox/core/InboxStore"
import type { Engine } from "./memoryEngine.ts"
import * as Store from "./memoryStore.ts"

/** The span records are kept and forgotten in: PgInboxStore's default partition span. */
export const SPAN_MS = 24 * 60 * 60 * 1000

const spanEnd = (at: number) => (Math.floor(at / SPAN_MS) + 1) * SPAN_MS

export const make = (engine: Engine): InboxStore["Service"] => {
  const { call, read, store } = engine
  // A timeless key is kept at the start of the span it is recorded in and looked up at any time.
  const keyed = (key: ProcessedKey, now: number) => {
    const time = keyTime(key)
    const at = time ?? Math.floor(now / SPAN_MS) * SPAN_MS
    return { at, timeless: time === undefined, k: Store.inboxRecordKey(key.consumer, key.identity, at) }
  }
  const anyTime = (tx: Store.Transaction | undefined, key: ProcessedKey) =>
    Store.visibleInbox(store, tx).some(([, r]) => r.consumer === key.consumer && r.identity === key.identity)
  const recordOne = (tx: Store.Transaction | undefined, key: ProcessedKey, now: number) => {
    const { at, k, timeless } = keyed(key, now)
    if (at < store.inboxHorizon) return { outcome: "expired" as const, k }
    if (Store.readInbox(store, tx, k) !== undefined || (timeless && anyTime(tx, key))) {
      return { outcome: "duplicate" as const, k }
    }
    Store.writeInbox(store, tx, k, { consumer: key.consumer, identity: key.identity, recordedAt: now, eventTime: at })
    return { outcome: "recorded" as const, k }
  }
  // One lock per consumer and identity, whatever the time: a timeless key's writers wait for each other.
  const resource = (key: ProcessedKey) => Store.inboxResource(Store.inboxKey(key.consumer, key.identity))
  return {
    record: (key, now) =>
      call<RecordOutcome>(
        "inbox.record",
        () => [resource(key)],
        (tx) => {
          const { outcome } = recordOne(tx, key, now)
          return outcome === "recorded" ? { result: outcome, touched: [resource(key)] } : { result: outcome }
        }
      ),
    // One call (fault target "inbox.record", like `record`): all keys' locks, then all writes.
    recordBatch: (keys, now) =>
      call<ReadonlyArray<RecordOutcome>>(
        "inbox.record",
        () => keys.map(resource),
        (tx) => {
          const touched: Array<string> = []
          const outcomes = keys.map((key) => {
            const { outcome } = recordOne(tx, key, now)
            if (outcome === "recorded") touched.push(resource(key))
            return outcome
          })
          return { result: outcomes, touched }
        }
      ),
    exists: (key) => read("inbox.exists", (tx) => anyTime(tx, key)),
    // Whole spans that ended by `olderThan`, whatever `limit` says (as PostgreSQL's partitions).
    purge: (olderThan) =>
      call(
        "inbox.purge",
        () => [],
        (tx) => {
          const horizon = Math.floor(olderThan / SPAN_MS) * SPAN_MS
          if (horizon > store.inboxHorizon) store.inboxHorizon = horizon
          const doomed = Store.visibleInbox(store, tx).filter(([, record]) => spanEnd(record.eventTime) <= olderThan)
          for (const [k] of doomed) Store.writeInbox(store, tx, k, null)
          return { result: doomed.length }
        }
      ),
    horizon: read("inbox.horizon", () => store.inboxHorizon)
  }
}
