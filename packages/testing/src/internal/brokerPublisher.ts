/**
 * `Publisher` over the in-memory broker: Kafka's key partitioner, appends per partition batch, faults,
 * and Kafka's record-batch size limit.
 *
 * The size limit has two halves, as on the real services. The broker ({@link brokerAccepts})
 * refuses a record batch whose bytes exceed `max.message.bytes` (`MESSAGE_TOO_LARGE`), whatever
 * each record weighs. The client decides how records go into batches: by default as the Kafka
 * publisher does (each partition's records split into batches under the limit,
 * sent one after the other, a lone record too large failing permanently on its own); with the
 * deliberately wrong `"whole-call-batch"` as plain kafkajs does (one
 * batch per partition per call; a size error fails every record of the call).
 *
 * Like the Kafka publisher (`combinePartitions`, default on), a call whose
 * partitions each fit one record batch goes out as one request (this broker has one node). When a
 * partition of it fails, the broker has still written the others, and the publisher, unable to tell
 * which landed, sends the call again per partition: those partitions are written twice. A lost
 * answer loses the whole request's answer: every partition written, every record reported failed.
 *
 * @internal
 */
import {
  PermanentPublishError,
  type PublishError,
  RetriablePublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import { EVENT_ID_HEADER } from "@effect-outbox/core/OutboxMessage"
import type { Publisher, PublishOutcome, PublishRequest } from "@effect-outbox/core/Publisher"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { PublishFault } from "./brokerEngine.ts"
import { type BrokerEngine, type StoredRecord, tp } from "./brokerEngine.ts"

/**
 * How the client puts a call's records into record batches:
 * - `"split"` (default, the library's behaviour): per partition, batches under the limit.
 * - `"whole-call-batch"` (deliberately wrong): one batch per partition per
 *   call; one partition's `MESSAGE_TOO_LARGE` fails every record of the call, those whose
 *   partition batch did land included (kafkajs throws the first partition error and drops the
 *   other partitions' offsets; an adapter that passes it on gives it to every record).
 */
export type Batching = "split" | "whole-call-batch"

/** A record as it goes on the wire, with its place in the call. */
interface Outgoing extends RecordSize.SizedRecord {
  readonly index: number
  readonly request: PublishRequest
}

/** The broker's check of one record batch against `max.message.bytes`. */
export const brokerAccepts = (records: ReadonlyArray<RecordSize.SizedRecord>, maxMessageBytes: number): boolean =>
  RecordSize.batchBytes(records) <= maxMessageBytes

const tooLargeReason = (records: ReadonlyArray<RecordSize.SizedRecord>, maxMessageBytes: number) =>
  `MESSAGE_TOO_LARGE: the record batch of ${records.length} record(s) takes ${RecordSize.batchBytes(records)} bytes, ` +
  `over the topic's max.message.bytes of ${maxMessageBytes}`

/** One partition's records of a call, in request order. */
interface PartitionRecords {
  readonly topic: string
  readonly partition: number
  readonly records: Array<Outgoing>
}

/** How one publisher sends: its batching, the size limit, and where keyless records go next. */
interface Sender {
  readonly engine: BrokerEngine
  readonly maxMessageBytes: number
  readonly batching: Batching
  /** One request for a call whose partitions each fit one record batch. */
  readonly combine: boolean
  /** Topic → the last partition a keyless record went to. */
  readonly roundRobin: Map<string, number>
}

/** Kafka's partitioner: the explicit partition, else the key's hash, else round robin. */
const partitionOf = (
  sender: Sender,
  request: PublishRequest,
  partitionCount: number
): number | UnknownPartitionError => {
  if (request.partition !== null) {
    const partition = request.partition
    if (!Number.isInteger(partition) || partition < 0 || partition >= partitionCount) {
      return new UnknownPartitionError({ topic: request.topic, partition, partitionCount })
    }
    return partition
  }
  if (request.key !== null) return keyPartition(request.key, partitionCount)
  const counter = (sender.roundRobin.get(request.topic) ?? -1) + 1
  sender.roundRobin.set(request.topic, counter)
  return counter % partitionCount
}

/**
 * The call's records grouped by partition, in order of first appearance; a request that cannot
 * be routed (no such topic or partition) gets its failed outcome here instead.
 */
const groupByPartition = (
  sender: Sender,
  requests: ReadonlyArray<PublishRequest>,
  outcomes: Array<PublishOutcome>
): Map<string, PartitionRecords> => {
  const batches = new Map<string, PartitionRecords>()
  requests.forEach((request, index) => {
    const logs = sender.engine.topics.get(request.topic)
    if (logs === undefined) {
      outcomes[index] = Result.fail(
        new PermanentPublishError({
          topic: request.topic,
          reason: "the topic does not exist (topics are not auto-created: create it with BrokerAdmin.ensureTopic)"
        })
      )
      return
    }
    const partition = partitionOf(sender, request, logs.length)
    if (typeof partition !== "number") {
      outcomes[index] = Result.fail(partition)
      return
    }
    const key = tp(request.topic, partition)
    const batch = batches.get(key) ?? { topic: request.topic, partition, records: [] }
    // The headers the Kafka publisher sends: `event-id` is the request id unless `writeEventId`
    // is false (a dead letter or replay keeps the headers it had, and no more).
    batch.records.push({
      index,
      request,
      key: request.key,
      headers:
        request.writeEventId === false ? { ...request.headers } : { ...request.headers, [EVENT_ID_HEADER]: request.id },
      payload: request.payload
    })
    batches.set(key, batch)
  })
  return batches
}

/** The error an injected fault other than a lost acknowledgement gives the partition's records. */
const faultError = (
  fault: Exclude<PublishFault, "lost_ack">,
  reason: string,
  topic: string,
  partition: number
): PublishError => {
  switch (fault) {
    case "retriable":
      return new RetriablePublishError({ topic, reason })
    case "permanent":
      return new PermanentPublishError({ topic, reason })
    case "unknown_partition":
      return new UnknownPartitionError({ topic, partition })
  }
}

/**
 * The Kafka publisher's way: a partition's records in batches under the limit, one after the
 * other; a batch the broker refuses is halved, a lone record it refuses fails permanently and
 * the younger records of its key in this call are not sent.
 */
const sendSplit = (
  topic: string,
  records: ReadonlyArray<Outgoing>,
  append: (batch: ReadonlyArray<Outgoing>) => void,
  outcomes: Array<PublishOutcome>,
  maxMessageBytes: number
) => {
  const queue = RecordSize.splitByBatchBytes(records, maxMessageBytes)
  const failedKeys = new Set<string>()
  while (queue.length > 0) {
    const batch = queue.shift()!.filter((r) => {
      if (r.key === null || !failedKeys.has(r.key)) return true
      outcomes[r.index] = Result.fail(
        new RetriablePublishError({ topic, reason: `not sent: an older record of key ${r.key} failed in this call` })
      )
      return false
    })
    if (batch.length === 0) continue
    if (brokerAccepts(batch, maxMessageBytes)) {
      append(batch)
      continue
    }
    if (batch.length > 1) {
      const half = Math.ceil(batch.length / 2)
      queue.unshift(batch.slice(0, half), batch.slice(half))
      continue
    }
    const single = batch[0]!
    outcomes[single.index] = Result.fail(
      new PermanentPublishError({ topic, reason: RecordSize.describeTooLarge(single, maxMessageBytes) })
    )
    if (single.key !== null) failedKeys.add(single.key)
  }
}

/** Whether the Kafka publisher would send these partitions in one request. */
const combinable = (sender: Sender, groups: ReadonlyArray<PartitionRecords>): boolean =>
  sender.batching === "split" &&
  sender.combine &&
  groups.length > 1 &&
  RecordSize.fitsOneRequest(groups, () => sender.maxMessageBytes)

/** Publishes one call at `now`: each request's outcome, in request order. */
const publish = (sender: Sender, requests: ReadonlyArray<PublishRequest>, now: number): Array<PublishOutcome> => {
  const { engine, maxMessageBytes } = sender
  const outcomes = new Array<PublishOutcome>(requests.length)
  let appended = false
  let tooLarge: PermanentPublishError | undefined // whole-call-batch: the call's size error
  const sendable: Array<number> = []
  const groups = [...groupByPartition(sender, requests, outcomes).values()]
  const faults = groups.map(({ topic, partition, records }) =>
    engine.publishFault({ topic, partition, requests: records.map((r) => r.request) })
  )
  const write = (topic: string, partition: number, batch: ReadonlyArray<Outgoing>, report: boolean) => {
    const log = engine.topics.get(topic)![partition]!
    for (const r of batch) {
      if (report) outcomes[r.index] = Result.succeed({ topic, partition, offset: String(log.length) })
      log.push({
        key: r.request.key,
        headers: { ...r.headers },
        value: new Uint8Array(r.request.payload),
        timestamp: now
      } satisfies StoredRecord)
    }
    appended = true
  }
  if (combinable(sender, groups)) {
    // One request: the broker writes every partition without an error of its own.
    groups.forEach(({ topic, partition, records }, g) => {
      if (faults[g] === undefined || faults[g].fault === "lost_ack") write(topic, partition, records, true)
    })
    const lostAck = faults.find((f) => f?.fault === "lost_ack")
    if (faults.every((f) => f === undefined)) {
      engine.notify()
      return outcomes
    }
    if (faults.every((f) => f === undefined || f.fault === "lost_ack")) {
      // The request's answer is lost: written, but every record reported failed.
      for (const { topic, records } of groups) {
        const lost = new RetriablePublishError({
          topic,
          reason: `${lostAck!.reason}: acknowledgement lost after append`
        })
        for (const r of records) outcomes[r.index] = Result.fail(lost)
      }
      engine.notify()
      return outcomes
    }
    // A partition failed the request: the call is sent again per partition (below), so the
    // partitions written above are written twice.
  }
  groups.forEach(({ partition, records, topic }, g) => {
    const fault = faults[g]
    sendable.push(...records.map((r) => r.index))
    if (fault !== undefined && fault.fault !== "lost_ack") {
      const error = faultError(fault.fault, fault.reason, topic, partition)
      for (const r of records) outcomes[r.index] = Result.fail(error)
      return
    }
    const append = (batch: ReadonlyArray<Outgoing>) => write(topic, partition, batch, true)
    if (sender.batching === "whole-call-batch") {
      if (brokerAccepts(records, maxMessageBytes)) append(records)
      else tooLarge ??= new PermanentPublishError({ topic, reason: tooLargeReason(records, maxMessageBytes) })
    } else {
      sendSplit(topic, records, append, outcomes, maxMessageBytes)
    }
    if (fault !== undefined) {
      // Lost acknowledgement: what was appended is reported as failed.
      const lost = new RetriablePublishError({ topic, reason: `${fault.reason}: acknowledgement lost after append` })
      for (const r of records) if (Result.isSuccess(outcomes[r.index]!)) outcomes[r.index] = Result.fail(lost)
    }
  })
  // kafkajs threw the first partition's error for the whole call; the old adapter gave it to
  // every record it had sent, landed or not.
  if (tooLarge !== undefined) for (const i of sendable) outcomes[i] = Result.fail(tooLarge)
  if (appended) engine.notify()
  return outcomes
}

export const make = (
  engine: BrokerEngine,
  latency: Duration.Duration | undefined,
  maxMessageBytes: number = RecordSize.DEFAULT_MAX_MESSAGE_BYTES,
  batching: Batching = "split",
  combine = true
): Publisher["Service"] => {
  const sender: Sender = { engine, maxMessageBytes, batching, combine, roundRobin: new Map() }
  return {
    publish: (requests) =>
      Effect.andThen(
        latency === undefined ? Effect.void : Effect.sleep(latency),
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => publish(sender, requests, now)))
      )
  }
}
