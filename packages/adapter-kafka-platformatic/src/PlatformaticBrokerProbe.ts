/**
 * `BrokerProbe` on @platformatic/kafka: the Kafka layer's `Probe` (did a timed-out send land
 * after all?) over group-less fetches, so, unlike the kafkajs driver, no throwaway consumer group
 * is joined or left behind.
 *
 * @since 0.1.0
 */
import { BrokerProbe, type ProbeManyRequest, type ProbeRequest } from "@effect-outbox/core/BrokerProbe"
import type { ProbeError } from "@effect-outbox/core/Errors"
import type { EventId, PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Probe from "@effect-outbox/kafka/Probe"
import type { Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { bounds, readRanges } from "./internal/partitionFetch.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { protocol } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type PlatformaticBrokerProbeOptions = Probe.ProbeOptions

const driver = (consumer: Consumer): Probe.ProbeDriver => ({
  protocol,
  bounds: (topic, timestamp) => bounds(consumer, topic, timestamp),
  scan: (topic, ranges, visit) =>
    Stream.runForEachWhile(readRanges(consumer, topic, ranges, "uncommitted"), (record) =>
      Effect.succeed(visit(record) !== "stop")
    )
})

/**
 * @since 0.1.0
 * @category operations
 */
export const find = (
  consumer: Consumer,
  request: ProbeRequest,
  options: PlatformaticBrokerProbeOptions = {}
): Effect.Effect<Option.Option<PublishReceipt>, ProbeError> => Probe.find(driver(consumer), request, options)

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
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> => Probe.findMany(driver(consumer), request, options)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticBrokerProbeOptions = {}
): Effect.Effect<BrokerProbe["Service"], never, PlatformaticClient> =>
  PlatformaticClient.useSync(({ offsets }) => Probe.make(driver(offsets), options))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticBrokerProbeOptions = {}
): Layer.Layer<BrokerProbe, never, PlatformaticClient> => Layer.effect(BrokerProbe)(make(options))
