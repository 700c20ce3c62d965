/**
 * `ParkedStore` in memory: parked positions per consumer group, kept as long as the layer lives
 * (so across consumer restarts and rebalances within a test), with the same bound and order as
 * the PostgreSQL store.
 *
 * @since 0.1.0
 */
import {
  defaultMaxRecords,
  type ParkedKey,
  ParkedLimitError,
  ParkedStore,
  type ReleaseTarget
} from "@effect-outbox/core/ParkedStore"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

interface Row {
  readonly consumer: string
  readonly topic: string
  readonly partition: number
  readonly key: string
  readonly offset: bigint
  /** When it was parked (Clock millis). */
  readonly at: number
}

const slot = (consumer: string, topic: string, partition: number, offset: string | bigint) =>
  `${consumer}\u0000${topic}\u0000${partition}\u0000${offset}`

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: { readonly maxRecords?: number } = {}): ParkedStore["Service"] => {
  const rows = new Map<string, Row>()
  const requests = new Map<string, ReleaseTarget>()
  const requestId = (t: ReleaseTarget) => `${t.consumer}\u0000${t.topic}\u0000${t.partition}\u0000${t.key}`
  const maxRecords = Math.max(1, options.maxRecords ?? defaultMaxRecords)
  return {
    park: (consumer, positions) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const held = [...rows.values()].filter((r) => r.consumer === consumer).length
        const fresh = positions.filter((p) => !rows.has(slot(consumer, p.topic, p.partition, BigInt(p.offset))))
        if (held + fresh.length > maxRecords) return Effect.fail(new ParkedLimitError({ consumer, limit: maxRecords }))
        for (const p of fresh) {
          rows.set(slot(consumer, p.topic, p.partition, BigInt(p.offset)), {
            ...p,
            consumer,
            offset: BigInt(p.offset),
            at: now
          })
        }
        return Effect.void
      }),
    list: (filter = {}) =>
      Effect.sync(() => {
        const keys = new Map<string, { readonly key: ParkedKey; readonly offsets: Array<bigint>; at: number }>()
        for (const r of rows.values()) {
          if (filter.consumer !== undefined && r.consumer !== filter.consumer) continue
          if (filter.topic !== undefined && r.topic !== filter.topic) continue
          if (filter.partition !== undefined && r.partition !== filter.partition) continue
          const id = `${r.consumer}\u0000${r.topic}\u0000${r.partition}\u0000${r.key}`
          const entry = keys.get(id) ?? {
            key: { consumer: r.consumer, topic: r.topic, partition: r.partition, key: r.key, offsets: [] },
            offsets: [],
            at: r.at
          }
          entry.offsets.push(r.offset)
          entry.at = Math.min(entry.at, r.at)
          keys.set(id, entry)
        }
        return [...keys.values()]
          .map(({ at, key, offsets }) => {
            offsets.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
            return { key: { ...key, offsets: offsets.map(String), parkedAt: at }, first: offsets[0]! }
          })
          .sort(
            (a, b) =>
              a.key.consumer.localeCompare(b.key.consumer) ||
              a.key.topic.localeCompare(b.key.topic) ||
              a.key.partition - b.key.partition ||
              (a.first < b.first ? -1 : a.first > b.first ? 1 : 0)
          )
          .map(({ key }) => key)
      }),
    requestRelease: (target) =>
      Effect.sync(() => {
        if (!requests.has(requestId(target))) requests.set(requestId(target), { ...target })
      }),
    releaseRequests: (consumer) => Effect.sync(() => [...requests.values()].filter((t) => t.consumer === consumer)),
    clearRelease: (target) =>
      Effect.sync(() => {
        requests.delete(requestId(target))
      }),
    remove: (consumer, positions) =>
      Effect.sync(() => {
        for (const p of positions) rows.delete(slot(consumer, p.topic, p.partition, BigInt(p.offset)))
      })
  }
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: { readonly maxRecords?: number } = {}): Layer.Layer<ParkedStore> =>
  Layer.sync(ParkedStore)(() => make(options))
