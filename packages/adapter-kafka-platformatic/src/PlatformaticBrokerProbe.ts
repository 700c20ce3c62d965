/**
 * `BrokerProbe` on @platformatic/kafka: finds a record by its `event-id` header in the partition's
 * records written since `since` (minus a clock-skew margin). Reads with group-less fetches, so,
 * unlike the kafkajs adapter, no throwaway consumer group is joined or left behind.
 *
 * @since 0.1.0
 */
import { BrokerProbe, type ProbeManyRequest, type ProbeRequest } from "@effect-outbox/core/BrokerProbe"
import { ProbeError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type EventId, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import type { Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { fetchOnce, type Range } from "./internal/partitionFetch.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, isUnknownTopic, toProbeError } from "./PlatformaticErrors.ts"
import { brokerCall } from "./PlatformaticRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticBrokerProbeOptions {
  /** Upper bound on one probe (default 30000). */
  readonly timeoutMillis?: number | undefined
  /** Records read before giving up (default 1 000 000). */
  readonly maxRecords?: number | undefined
  /** How far before `since` the scan starts (default 60000). */
  readonly clockSkewMillis?: number | undefined
}

// Where to look: a topic, one partition or all (`null`), records written since `since`.
type Window = Pick<ProbeRequest, "topic" | "partition" | "since">

const ranges = (consumer: Consumer, request: Window, skew: number) =>
  Effect.gen(function* () {
    const { topic } = request
    const [lows, highs, starts] = yield* brokerCall("listOffsets", () =>
      Promise.all([
        consumer.listOffsets({ topics: [topic], timestamp: -2n }),
        consumer.listOffsets({ topics: [topic], timestamp: -1n }),
        consumer.listOffsets({ topics: [topic], timestamp: BigInt(Math.max(0, request.since - skew)) })
      ])
    )
    const result: Array<Range> = []
    ;(highs.get(topic) ?? []).forEach((high, partition) => {
      if (request.partition !== null && partition !== request.partition) return
      const low = lows.get(topic)?.[partition] ?? 0n
      const at = starts.get(topic)?.[partition]
      // -1: no record at or after the timestamp.
      const start = at === undefined || at < 0n ? high : at
      const from = start < low ? low : start
      if (from < high) result.push({ partition, start: from, end: high })
    })
    return result
  })

// Reads the window once and returns the receipts of the wanted ids found in it (stops early
// when every one is found).
const scan = (
  consumer: Consumer,
  request: Window,
  wanted: ReadonlySet<string>,
  options: PlatformaticBrokerProbeOptions
): Effect.Effect<Map<EventId, PublishReceipt>, ProbeError> => {
  const timeoutMillis = options.timeoutMillis ?? 30_000
  const maxRecords = options.maxRecords ?? 1_000_000
  return Effect.gen(function* () {
    const found = new Map<EventId, PublishReceipt>()
    const todo = yield* ranges(consumer, request, options.clockSkewMillis ?? 60_000)
    let read = 0
    for (const range of todo) {
      let from = range.start
      while (from < range.end) {
        const { next, records } = yield* fetchOnce(consumer, request.topic, range, from)
        for (const record of records) {
          read++
          const id = record.headers[EVENT_ID_HEADER]
          if (id !== undefined && wanted.has(id) && !found.has(id as EventId)) {
            found.set(id as EventId, { topic: record.topic, partition: record.partition, offset: record.offset })
            if (found.size === wanted.size) return found
          }
        }
        if (read >= maxRecords) {
          return yield* new ProbeError({ topic: request.topic, reason: `gave up after reading ${read} records` })
        }
        // A fetch that makes no progress would loop: the range holds nothing more to read.
        if (next <= from) break
        from = next
      }
    }
    return found
  }).pipe(
    Effect.catch((error) =>
      error instanceof ProbeError
        ? Effect.fail(error)
        : isUnknownTopic(error)
          ? Effect.succeed(new Map<EventId, PublishReceipt>())
          : Effect.fail(toProbeError(request.topic, error))
    ),
    Effect.timeoutOrElse({
      duration: timeoutMillis,
      orElse: () =>
        Effect.fail(new ProbeError({ topic: request.topic, reason: `no answer within ${timeoutMillis} ms` }))
    }),
    Effect.tapError((error) => Effect.logDebug(`kafka probe failed: ${describe(error)}`))
  )
}

/**
 * @since 0.1.0
 * @category operations
 */
export const find = (
  consumer: Consumer,
  request: ProbeRequest,
  options: PlatformaticBrokerProbeOptions = {}
): Effect.Effect<Option.Option<PublishReceipt>, ProbeError> =>
  scan(consumer, request, new Set([request.eventId]), options).pipe(
    Effect.map((found) => Option.fromNullishOr(found.get(request.eventId))),
    Effect.tap((found) =>
      Effect.logDebug(
        `kafka probe ${request.topic}/${request.partition ?? "*"} for ${request.eventId}: ${Option.isSome(found) ? `found at ${found.value.partition}@${found.value.offset}` : "absent"}`
      )
    ),
    Effect.withSpan("kafka.probe.find", { attributes: { topic: request.topic, partition: request.partition ?? -1 } })
  )

/**
 * The receipts of those of `eventIds` found in one read of the window (the log relay's
 * crash-window probe).
 *
 * @since 0.1.0
 * @category operations
 */
export const findMany = (
  consumer: Consumer,
  request: ProbeManyRequest,
  options: PlatformaticBrokerProbeOptions = {}
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> =>
  request.eventIds.length === 0
    ? Effect.succeed(new Map())
    : scan(consumer, request, new Set(request.eventIds), options).pipe(
        Effect.withSpan("kafka.probe.findMany", {
          attributes: { topic: request.topic, count: request.eventIds.length }
        })
      )

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticBrokerProbeOptions = {}
): Effect.Effect<BrokerProbe["Service"], never, PlatformaticClient> =>
  Effect.gen(function* () {
    const { offsets } = yield* PlatformaticClient
    return BrokerProbe.of({
      find: (request) => find(offsets, request, options),
      findMany: (request) => findMany(offsets, request, options)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticBrokerProbeOptions = {}
): Layer.Layer<BrokerProbe, never, PlatformaticClient> => Layer.effect(BrokerProbe)(make(options))
