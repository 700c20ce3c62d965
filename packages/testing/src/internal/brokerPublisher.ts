/**
 * `Publisher` over the in-memory broker: Kafka's key partitioner, appends per partition batch, faults.
 *
 * @internal
 */
import {
  PermanentPublishError,
  type PublishError,
  RetriablePublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import type { Publisher, PublishOutcome, PublishRequest } from "@effect-outbox/core/Publisher"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { type BrokerEngine, tp } from "./brokerEngine.ts"
import { partitionForKey } from "./murmur2.ts"

export const make = (
  engine: BrokerEngine,
  latency: Duration.Duration | undefined,
  maxMessageBytes: number = RecordSize.DEFAULT_MAX_MESSAGE_BYTES
): Publisher["Service"] => {
  const { notify, publishFault, topics } = engine
  const roundRobin = new Map<string, number>()

  const publish = (requests: ReadonlyArray<PublishRequest>, now: number): ReadonlyArray<PublishOutcome> => {
    const outcomes = new Array<PublishOutcome>(requests.length)
    // Partition batches in order of first appearance; each keeps its records in request order.
    const batches = new Map<string, { topic: string; partition: number; indices: Array<number> }>()
    requests.forEach((request, index) => {
      const logs = topics.get(request.topic)
      if (logs === undefined) {
        outcomes[index] = Result.fail(
          new PermanentPublishError({
            topic: request.topic,
            reason: "the topic does not exist (topics are not auto-created: create it with BrokerAdmin.ensureTopic)"
          })
        )
        return
      }
      let partition: number
      if (request.partition !== null) {
        partition = request.partition
        if (!Number.isInteger(partition) || partition < 0 || partition >= logs.length) {
          outcomes[index] = Result.fail(
            new UnknownPartitionError({ topic: request.topic, partition, partitionCount: logs.length })
          )
          return
        }
      } else if (request.key !== null) {
        partition = partitionForKey(request.key, logs.length)
      } else {
        const counter = (roundRobin.get(request.topic) ?? -1) + 1
        roundRobin.set(request.topic, counter)
        partition = counter % logs.length
      }
      const key = tp(request.topic, partition)
      const batch = batches.get(key) ?? { topic: request.topic, partition, indices: [] }
      batch.indices.push(index)
      batches.set(key, batch)
    })
    let appended = false
    for (const { indices, partition, topic } of batches.values()) {
      const fault = publishFault({ topic, partition, requests: indices.map((i) => requests[i]!) })
      const failWith = (error: PublishError) => {
        for (const i of indices) outcomes[i] = Result.fail(error)
      }
      if (fault !== undefined && fault.fault !== "lost_ack") {
        switch (fault.fault) {
          case "retriable":
            failWith(new RetriablePublishError({ topic, reason: fault.reason }))
            break
          case "permanent":
            failWith(new PermanentPublishError({ topic, reason: fault.reason }))
            break
          case "unknown_partition":
            failWith(new UnknownPartitionError({ topic, partition }))
            break
        }
        continue
      }
      const log = topics.get(topic)![partition]!
      // Kafka's record-batch limit, as the Kafka publisher meets it: a record that cannot fit in
      // a batch alone fails permanently and younger records of its key are not sent; the others
      // are appended (the real publisher splits them into batches under the limit).
      const failedKeys = new Set<string>()
      for (const i of indices) {
        const request = requests[i]!
        if (request.key !== null && failedKeys.has(request.key)) {
          outcomes[i] = Result.fail(
            new RetriablePublishError({ topic, reason: `not sent: an older record of key ${request.key} failed in this call` })
          )
          continue
        }
        const record = { key: request.key, headers: { ...request.headers }, payload: request.payload }
        if (RecordSize.singleRecordBatchBytes(record) > maxMessageBytes) {
          outcomes[i] = Result.fail(
            new PermanentPublishError({ topic, reason: RecordSize.describeTooLarge(record, maxMessageBytes) })
          )
          if (request.key !== null) failedKeys.add(request.key)
          continue
        }
        const offset = log.length
        log.push({
          key: request.key,
          headers: { ...request.headers },
          value: new Uint8Array(request.payload),
          timestamp: now
        })
        outcomes[i] = Result.succeed({ topic, partition, offset: String(offset) })
      }
      appended = true
      if (fault !== undefined) {
        failWith(new RetriablePublishError({ topic, reason: `${fault.reason}: acknowledgement lost after append` }))
      }
    }
    if (appended) notify()
    return outcomes
  }

  return {
    publish: (requests) =>
      Effect.andThen(
        latency === undefined ? Effect.void : Effect.sleep(latency),
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => publish(requests, now)))
      )
  }
}
