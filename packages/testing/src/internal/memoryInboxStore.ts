/**
 * `InboxStore` over the in-memory engine.
 *
 * @internal
 */
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { Engine } from "./memoryEngine.ts"
import * as Store from "./memoryStore.ts"

export const make = (engine: Engine): InboxStore["Service"] => {
  const { call, read, store } = engine
  return {
    record: (key, now) => {
      const k = Store.inboxKey(key.consumer, key.identity)
      return call<"recorded" | "duplicate">(
        "inbox.record",
        () => [Store.inboxResource(k)],
        (tx) => {
          if (Store.readInbox(store, tx, k) !== undefined) return { result: "duplicate" }
          Store.writeInbox(store, tx, k, { consumer: key.consumer, identity: key.identity, recordedAt: now })
          return { result: "recorded", touched: [Store.inboxResource(k)] }
        }
      )
    },
    // One call (fault target "inbox.record", like `record`): all keys' locks, then all writes.
    recordBatch: (keys, now) => {
      const ks = keys.map((key) => Store.inboxKey(key.consumer, key.identity))
      return call<ReadonlyArray<"recorded" | "duplicate">>(
        "inbox.record",
        () => ks.map(Store.inboxResource),
        (tx) => {
          const touched: Array<string> = []
          const outcomes = keys.map((key, i) => {
            const k = ks[i]!
            if (Store.readInbox(store, tx, k) !== undefined) return "duplicate" as const
            Store.writeInbox(store, tx, k, { consumer: key.consumer, identity: key.identity, recordedAt: now })
            touched.push(Store.inboxResource(k))
            return "recorded" as const
          })
          return { result: outcomes, touched }
        }
      )
    },
    exists: (key) =>
      read(
        "inbox.exists",
        (tx) => Store.readInbox(store, tx, Store.inboxKey(key.consumer, key.identity)) !== undefined
      ),
    purge: (olderThan, limit) =>
      call(
        "inbox.purge",
        () => [],
        (tx) => {
          const doomed = Store.visibleInbox(store, tx)
            .filter(
              ([k, record]) =>
                record.recordedAt < olderThan && !Store.isLockedByOther(store, tx, Store.inboxResource(k))
            )
            .sort((a, b) => a[1].recordedAt - b[1].recordedAt)
            .slice(0, Math.max(0, limit))
          for (const [k] of doomed) Store.writeInbox(store, tx, k, null)
          return { result: doomed.length, touched: doomed.map(([k]) => Store.inboxResource(k)) }
        }
      )
  }
}
