/**
 * `Publisher` over any Kafka client: an idempotent producer with acks=-1, explicit partitions and
 * a receipt per record in request order. Where each record goes is decided before sending
 * (`Layouts`); each partition's records go in record batches under the topic's
 * `max.message.bytes` (`PartitionSend`), so every broker error is attributed to the records it
 * concerns. One producer at a time (`ProducerLeases`), replaced (a fresh producer id) after an
 * uncertain failure, a timeout or a topic growth. The client supplies a {@link ProduceDriver}.
 *
 * @since 0.1.0
 */
import { BrokerUnavailableError, type PublishError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Combined from "./internal/combined.ts"
import * as Send from "./internal/send.ts"
import type { KafkaDriver, TopicLayout } from "./KafkaDriver.ts"
import * as Layouts from "./Layouts.ts"
import { producerResets, publishedRecords } from "./Metrics.ts"
import * as PartitionSend from "./PartitionSend.ts"
import * as ProducerLeases from "./ProducerLeases.ts"
import * as TopicLimits from "./TopicLimits.ts"

/**
 * One partition's records within a produce request.
 *
 * @since 0.1.0
 * @category models
 */
export type Part = Send.Part

/**
 * How a client produces: its producers (made, connected, closed) and one produce request.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProduceDriver<P> extends ProducerLeases.ProducerDriver<P> {
  /**
   * Sends `parts` in one request: each part's base offset, `undefined` for a part the client did
   * not write (its metadata lacked the partition), or the client's error.
   */
  readonly produce: (producer: P, parts: ReadonlyArray<Part>) => Promise<ReadonlyArray<bigint | undefined>>
  /** Without compression a batch's size is exact, so a record that cannot fit alone is not sent. */
  readonly uncompressed: boolean
  /** One request may hold several partitions led by one broker (when each fits one record batch). */
  readonly combinePartitions: boolean
  /**
   * Set when the client refreshes metadata for every topic a producer ever sent to and fails
   * every refresh once one of them is deleted: every topic on the broker, read at most once a
   * second to replace such a producer.
   */
  readonly listTopics?: (() => Promise<ReadonlyArray<string>>) | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface PublisherOptions {
  /**
   * Upper bound on one publish call, retries included (default 8000). A partition batch that runs
   * out reports `BrokerUnavailableError` for its records: they may or may not have landed. Below
   * the relay's default `publishTimeout` (10 s) on purpose: the publisher answers first, so the
   * receipts of partitions that did land are kept instead of the whole call timing out (and a
   * @platformatic/kafka send to an unreachable broker does not settle by itself).
   */
  readonly publishTimeoutMillis?: number | undefined
  /** How long partition counts are cached before a publish re-reads them (default 5000). */
  readonly metadataMaxAgeMillis?: number | undefined
  /**
   * Send a call's partitions in one produce request when each one's records fit one record batch
   * (default `true`): one request per broker instead of one per partition (kafkajs's idempotent
   * producer sends one request per broker at a time, so each separate one costs a round trip). A
   * failed combined request replaces the producer and the call is sent again per partition, so
   * partitions that had landed are written twice (never lost). `false`: always one request per
   * partition.
   */
  readonly combinePartitions?: boolean | undefined
}

/**
 * A payload's bytes as a Node `Buffer` over the same memory (no copy), as both clients send it.
 *
 * @since 0.1.0
 * @category encoding
 */
export const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * The headers sent with a record: the request's own (they already carry `event-id` and
 * `traceparent`), with `event-id` guaranteed to be the request's id unless the request opts out.
 * The request's own object when it already says so (the usual case: no copy per record), so the
 * result is only read, never written.
 *
 * @since 0.1.0
 * @category encoding
 */
export const recordHeaders = (request: PublishRequest): Readonly<Record<string, string>> =>
  request.writeEventId === false || request.headers[EVENT_ID_HEADER] === request.id
    ? request.headers
    : { ...request.headers, [EVENT_ID_HEADER]: request.id }

/** Records of one call bound for one partition, in request order. */
interface PartitionGroup extends Part {
  /** The partition's leader as the layout last read it. */
  readonly leader: number
  readonly records: Array<Send.Outgoing>
}

type Outcomes = Array<PublishOutcome | undefined>

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = <P>(
  driver: KafkaDriver,
  producer: ProduceDriver<P>,
  options: PublisherOptions = {}
): Effect.Effect<Publisher["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMillis = options.publishTimeoutMillis ?? 8_000
    const targeted = new Set<string>()
    const leases = yield* ProducerLeases.make<P>({
      ...producer,
      onReplace: Effect.andThen(
        Metric.update(producerResets, 1),
        Effect.sync(() => targeted.clear())
      )
    })
    yield* Effect.addFinalizer(() => leases.closeAll)
    const sender: Send.Sender<P> = {
      leases,
      // The producer's own metadata may predate a growth: replace it.
      layouts: yield* Layouts.make(driver, options.metadataMaxAgeMillis ?? 5_000, leases.requestReset),
      protocol: driver.protocol,
      produce: (p, parts) => {
        for (const part of parts) targeted.add(part.topic)
        return producer.produce(p, parts)
      },
      timeoutMillis
    }
    const limits = yield* TopicLimits.make((topic) =>
      Effect.tryPromise(() => driver.topicConfig(topic, "max.message.bytes")).pipe(
        Effect.map(TopicLimits.parseBytes),
        Effect.orElseSucceed(() => undefined)
      )
    )
    const onSent = (records: number) => Metric.update(publishedRecords, records)
    const { protocol } = driver
    const partitionDriver: PartitionSend.Driver<Send.Outgoing> = {
      limitFor: limits.limitFor,
      invalidateLimit: limits.invalidate,
      send: () => Effect.die("replaced per call"),
      isRecordSizeError: (error) => !(error instanceof Send.SendError) && protocol.isRecordSizeError(error),
      verdict: (topic, error) =>
        error instanceof Send.SendError ? error.verdict : protocol.toPublishError(topic, error),
      describe: protocol.describe,
      uncompressed: producer.uncompressed,
      onSent
    }
    const sendPartition = (group: PartitionGroup, deadline: number, outcomes: Outcomes) =>
      PartitionSend.sendPartition(
        {
          ...partitionDriver,
          send: (topic, partition, batch) => Send.sendRecords(sender, topic, partition, batch, deadline)
        },
        group.topic,
        group.partition,
        group.records,
        outcomes
      )
    // One broker's partitions of a call: one request when they fit, else one per partition.
    const sendToLeader = (groups: ReadonlyArray<PartitionGroup>, deadline: number, outcomes: Outcomes) =>
      Effect.gen(function* () {
        if (
          producer.combinePartitions &&
          groups.length > 1 &&
          (yield* Combined.fits(groups, limits.limitFor)) &&
          (yield* Combined.send(sender, groups, deadline, outcomes, onSent))
        )
          return
        yield* Effect.forEach(groups, (group) => sendPartition(group, deadline, outcomes), {
          concurrency: "unbounded",
          discard: true
        })
      })
    const forgetDeleted =
      producer.listTopics === undefined
        ? (_: ReadonlyArray<Part>) => Effect.void
        : forgetDeletedTopics(producer.listTopics, targeted, leases)

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
        const deadline = Date.now() + timeoutMillis
        const outcomes: Outcomes = new Array(requests.length)
        const groups = yield* partitionGroups(sender.layouts, driver, requests, deadline, outcomes)
        if (groups.length === 0) return outcomes as ReadonlyArray<PublishOutcome>
        yield* forgetDeleted(groups)
        yield* Effect.forEach(byLeader(groups), (of) => sendToLeader(of, deadline, outcomes), {
          concurrency: "unbounded",
          discard: true
        })
        // A partition whose send came back unavailable waits while the topic's metadata is stale,
        // and its verdict names it, so the relay backs off that partition alone.
        for (const group of groups) {
          let unavailable = false
          for (const record of group.records) {
            const outcome = outcomes[record.index]
            if (outcome === undefined || Result.isSuccess(outcome)) continue
            const error = outcome.failure
            if (error._tag !== "BrokerUnavailableError") continue
            unavailable = true
            if (error.partition === undefined)
              outcomes[record.index] = Result.fail(
                new BrokerUnavailableError({ topic: error.topic, reason: error.reason, partition: group.partition })
              )
          }
          if (unavailable) sender.layouts.noteUnavailable(group.topic, group.partition)
        }
        return outcomes as ReadonlyArray<PublishOutcome>
      }).pipe(
        Effect.withSpan(
          "kafka.publisher.publish",
          { attributes: { records: requests.length } },
          { captureStackTrace: false }
        )
      )

    return Publisher.of({ publish })
  })

const byLeader = (groups: Iterable<PartitionGroup>): Array<Array<PartitionGroup>> => {
  const leaders = new Map<number, Array<PartitionGroup>>()
  for (const group of groups) {
    // Without a known leader a partition gets a request of its own.
    const of = group.leader < 0 ? undefined : leaders.get(group.leader)
    if (of !== undefined) of.push(group)
    else leaders.set(group.leader < 0 ? -1 - leaders.size : group.leader, [group])
  }
  return [...leaders.values()]
}

/**
 * Where each record goes, decided before sending, grouped by partition in request order (groups in
 * the order of their first record). Records that cannot be sent (no such topic or partition, no
 * metadata answer before `deadline`) get their outcome in `outcomes` at once. One pass over the
 * records, no key built per record: every record of the log relay comes through here.
 */
const partitionGroups = (
  layouts: Layouts.Layouts,
  driver: KafkaDriver,
  requests: ReadonlyArray<PublishRequest>,
  deadline: number,
  outcomes: Outcomes
) =>
  Effect.gen(function* () {
    // Each topic's layout (or why there is none), read once per call in order of first appearance.
    const topics = new Map<string, TopicSlots>()
    for (let i = 0; i < requests.length; i++) {
      const topic = requests[i]!.topic
      if (topics.has(topic)) continue
      const layout = yield* layouts.layoutFor(topic, requests).pipe(
        Effect.mapError((error) => driver.protocol.toPublishError(topic, error)),
        Effect.timeoutOrElse({
          duration: Math.max(1, deadline - Date.now()),
          orElse: () => Effect.fail(new BrokerUnavailableError({ topic, reason: "no metadata answer in time" }))
        }),
        Effect.result
      )
      topics.set(topic, { layout, groups: [] })
    }
    const groups: Array<PartitionGroup> = []
    for (let index = 0; index < requests.length; index++) {
      const request = requests[index]!
      const slots = topics.get(request.topic)!
      const layout = slots.layout
      const t = Result.isFailure(layout)
        ? ({ _tag: "Reject", error: layout.failure } as const)
        : layouts.target(request, layout.success)
      if (t._tag === "Reject") {
        outcomes[index] = Result.fail(t.error)
        continue
      }
      let group = slots.groups[t.partition]
      if (group === undefined) {
        group = { topic: t.topic, partition: t.partition, leader: t.leader, records: [] }
        slots.groups[t.partition] = group
        groups.push(group)
      }
      group.records.push({ index, key: request.key, headers: recordHeaders(request), payload: request.payload })
    }
    return groups
  })

/** A topic's layout for one call, and its partitions' groups by partition number. */
interface TopicSlots {
  readonly layout: Result.Result<TopicLayout | undefined, PublishError>
  readonly groups: Array<PartitionGroup | undefined>
}

/**
 * Replaces the producer when a topic it once sent to (outside this call) was deleted since.
 * Checked at most once a second.
 */
const forgetDeletedTopics = <P>(
  listTopics: () => Promise<ReadonlyArray<string>>,
  targeted: ReadonlySet<string>,
  leases: ProducerLeases.ProducerLeases<P>
) => {
  let verifiedAt = 0
  return (callGroups: ReadonlyArray<Part>) =>
    Effect.gen(function* () {
      const others = [...targeted].filter((t) => !callGroups.some((g) => g.topic === t))
      if (others.length === 0 || Date.now() - verifiedAt <= 1_000) return
      verifiedAt = Date.now()
      const names = yield* Effect.tryPromise(listTopics).pipe(Effect.orElseSucceed(() => undefined))
      if (names !== undefined && others.some((t) => !names.includes(t))) leases.requestReset()
    })
}
