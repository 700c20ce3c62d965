/**
 * What the `TopicReader` cases share: the services under test, and publishing and reading a
 * topic whole.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import type * as SuiteCase from "../suiteCase.ts"
import type { Topics } from "../topics.ts"

export type Services = TopicReader | Publisher | BrokerAdmin

export type Case = SuiteCase.Case<Topics, Services>

export const decoder = new TextDecoder()

/** Publishes `requests`, failing the test on any record that did not land. */
export const publishAll = (requests: ReadonlyArray<PublishRequest>) =>
  Effect.gen(function* () {
    const outcomes = yield* (yield* Publisher).publish(requests)
    return outcomes.map((outcome): PublishReceipt => {
      if (Result.isFailure(outcome)) throw new Error(`publish failed: ${outcome.failure.message}`)
      return outcome.success
    })
  })

export const readAll = (topic: string) =>
  Effect.gen(function* () {
    return yield* Stream.runCollect((yield* TopicReader).read(topic))
  })

/** `partition/offset`: where a record is. */
export const at = (r: { readonly partition: number; readonly offset: string }) => `${r.partition}/${r.offset}`

export const assertOffsetOrder = (records: ReadonlyArray<ConsumerRecord>) => {
  for (const partition of new Set(records.map((r) => r.partition))) {
    const offsets = records.filter((r) => r.partition === partition).map((r) => BigInt(r.offset))
    for (let i = 1; i < offsets.length; i++) {
      assert.isTrue(offsets[i - 1]! < offsets[i]!, `partition ${partition} out of offset order: ${offsets.join(",")}`)
    }
  }
}
