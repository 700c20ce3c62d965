/**
 * What-if (issue #14): a `Publisher` whose kafkajs producer runs on a worker thread of its own
 * (`publisherThread.ts`), so kafkajs's record encoding and its garbage stop sharing the relay's
 * event loop and heap with the replication stream. Each call's requests cross by structured clone
 * (payload bytes copied); a failure comes back as a `RetriablePublishError` carrying the worker's
 * message (enough for a latency bench, not the adapter's typed errors).
 */
import { Worker } from "node:worker_threads"
import { RetriablePublishError } from "@effect-outbox/core/Errors"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"

type Answer = { readonly receipt: PublishReceipt } | { readonly tag: string; readonly message: string }

export const layer = (brokers: ReadonlyArray<string>): Layer.Layer<Publisher> =>
  Layer.effect(Publisher)(
    Effect.gen(function* () {
      const worker = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const w = new Worker(new URL("./publisherThread.ts", import.meta.url), { workerData: { brokers } })
          await new Promise((resolve, reject) => {
            w.once("message", resolve)
            w.once("error", reject)
          })
          return w
        }),
        (w) => Effect.promise(() => w.terminate())
      )
      let next = 0
      const pending = new Map<number, (answers: ReadonlyArray<Answer>) => void>()
      worker.on("message", (m: { readonly call: number; readonly outcomes: ReadonlyArray<Answer> }) => {
        pending.get(m.call)?.(m.outcomes)
        pending.delete(m.call)
      })
      const publish = (requests: ReadonlyArray<PublishRequest>) =>
        Effect.map(
          Effect.callback<ReadonlyArray<Answer>>((resume) => {
            const call = next++
            pending.set(call, (answers) => resume(Effect.succeed(answers)))
            worker.postMessage({ call, requests })
          }),
          (answers): ReadonlyArray<PublishOutcome> =>
            answers.map((a, i) =>
              "receipt" in a
                ? Result.succeed(a.receipt)
                : Result.fail(
                    new RetriablePublishError({ topic: requests[i]!.topic, reason: `${a.tag}: ${a.message}` })
                  )
            )
        )
      return Publisher.of({ publish })
    })
  )
