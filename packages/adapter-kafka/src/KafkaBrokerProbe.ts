/**
 * `BrokerProbe` on kafkajs: the Kafka layer's `Probe` (did a timed-out send land after all?) over
 * kafkajs. The window's bounds come from a short-lived admin; its records are read by a
 * throwaway consumer (its own group id, nothing committed, read uncommitted so records of open
 * transactions count as "reached the broker"), and the group is deleted afterwards.
 *
 * kafkajs's admin reports the last stable offset as the end: the high watermark unless another
 * producer's Kafka transaction is open on the partition (the relay never writes transactionally).
 * Records past it are not searched; the answer is then `None` and the relay republishes, which
 * the consumer's event-id identity absorbs.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import { BrokerProbe, type ProbeManyRequest, type ProbeRequest } from "@effect-outbox/core/BrokerProbe"
import type { ProbeError } from "@effect-outbox/core/Errors"
import type { EventId, PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Probe from "@effect-outbox/kafka/Probe"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type Kafkajs from "kafkajs"
import { partitionBounds, readRanges } from "./internal/rangeRead.ts"
import { toConsumerRecord } from "./internal/records.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { protocol } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaBrokerProbeOptions extends Probe.ProbeOptions {
  /** Prefix of the throwaway consumer groups (default `effect-outbox-probe`). */
  readonly groupPrefix?: string | undefined
}

/** The kafkajs side of the probe: a throwaway consumer per read. */
const driver = (kafka: Kafkajs.Kafka, admin: Kafkajs.Admin, options: KafkaBrokerProbeOptions): Probe.ProbeDriver => ({
  protocol,
  bounds: (topic, timestamp) => partitionBounds(kafka, topic, timestamp),
  scan: (topic, ranges, visit) =>
    readRanges(
      kafka,
      admin,
      topic,
      ranges,
      // Read uncommitted: records of open transactions count as "reached the broker".
      {
        groupId: `${options.groupPrefix ?? "effect-outbox-probe"}-${randomUUID()}`,
        readUncommitted: true,
        retry: { retries: 3 }
      },
      async (partition, messages) =>
        messages.some((message) => visit(toConsumerRecord(topic, partition, message)) === "stop") ? "stop" : "continue"
    )
})

/**
 * @since 0.1.0
 * @category operations
 */
export const find = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: ProbeRequest,
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<Option.Option<PublishReceipt>, ProbeError> =>
  Probe.find(driver(kafka, admin, options), request, options)

/**
 * Every event of `eventIds` found in `topic` (one read of each partition from `since`, one
 * throwaway consumer): the log relay's takeover probe of a whole window.
 *
 * @since 0.1.0
 * @category operations
 */
export const findMany = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: ProbeManyRequest,
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> =>
  Probe.findMany(driver(kafka, admin, options), request, options)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<BrokerProbe["Service"], never, KafkaClient> =>
  KafkaClient.useSync(({ admin, kafka }) => Probe.make(driver(kafka, admin, options), options))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaBrokerProbeOptions = {}): Layer.Layer<BrokerProbe, never, KafkaClient> =>
  Layer.effect(BrokerProbe)(make(options))
