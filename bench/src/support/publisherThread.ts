/**
 * What-if: the kafkajs publisher on a worker thread of its own (its own event loop,
 * heap and GC), the other side of `workerPublisher.ts`. Builds `KafkaPublisher` on a `KafkaClient`
 * and answers each `{ call, requests }` with `{ call, outcomes }` (a receipt, or the failure's
 * tag and message). workerData: { brokers }.
 */
import { parentPort, workerData } from "node:worker_threads"
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaPublisher from "@effect-outbox/adapter-kafka/KafkaPublisher"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Result from "effect/Result"

const { brokers } = workerData as { readonly brokers: ReadonlyArray<string> }
const runtime = ManagedRuntime.make(
  KafkaPublisher.layer().pipe(
    Layer.provide(KafkaClient.layer({ brokers: [...brokers], clientId: "bench-publisher-thread" }))
  )
)
const publisher = await runtime.runPromise(
  Effect.gen(function* () {
    return yield* Publisher
  })
)

parentPort!.on("message", (m: { readonly call: number; readonly requests: ReadonlyArray<PublishRequest> }) => {
  runtime.runFork(
    Effect.map(publisher.publish(m.requests), (outcomes) =>
      parentPort!.postMessage({
        call: m.call,
        outcomes: outcomes.map((o) =>
          Result.isSuccess(o) ? { receipt: o.success } : { tag: o.failure._tag, message: o.failure.message }
        )
      })
    )
  )
})
parentPort!.postMessage("ready")
