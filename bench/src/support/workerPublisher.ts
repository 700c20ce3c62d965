/**
 * What-if: a `Publisher` whose kafkajs producer runs on a worker thread of its own
 * (`publisherThread.ts`), so kafkajs's record encoding and its garbage stop sharing the relay's
 * event loop and heap with the replication stream. Each call's requests cross by structured clone
 * (payload bytes copied); a failure comes back as a `RetriablePublishError` carrying the worker's
 * message (enough for a latency bench, not the adapter's typed errors), and a thread that dies
 * fails every call instead of leaving it waiting.
 */
import { RetriablePublishError } from "@effect-outbox/core/Errors"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Thread from "./thread.ts"

type Answer = { readonly receipt: PublishReceipt } | { readonly tag: string; readonly message: string }

export const layer = (brokers: ReadonlyArray<string>): Layer.Layer<Publisher> =>
  Layer.effect(Publisher)(
    Effect.gen(function* () {
      const { worker, failed } = yield* Effect.acquireRelease(
        Effect.promise(() =>
          Thread.start(new URL("./publisherThread.ts", import.meta.url), { brokers }, "publisher thread")
        ),
        ({ worker }) => Effect.promise(() => worker.terminate())
      )
      let next = 0
      const pending = new Map<number, (answers: ReadonlyArray<Answer> | string) => void>()
      // A thread that throws or exits answers every call, waiting or to come, with its failure.
      let dead: string | undefined
      failed.catch((error: unknown) => {
        dead = String(error)
        for (const answer of pending.values()) answer(dead)
        pending.clear()
      })
      worker.on("message", (m: { readonly call: number; readonly outcomes: ReadonlyArray<Answer> }) => {
        pending.get(m.call)?.(m.outcomes)
        pending.delete(m.call)
      })
      const publish = (requests: ReadonlyArray<PublishRequest>) =>
        Effect.map(
          Effect.callback<ReadonlyArray<Answer> | string>((resume) => {
            if (dead !== undefined) return resume(Effect.succeed(dead))
            const call = next++
            pending.set(call, (answers) => resume(Effect.succeed(answers)))
            worker.postMessage({ call, requests })
          }),
          (answers): ReadonlyArray<PublishOutcome> =>
            requests.map((request, i) => {
              const a = typeof answers === "string" ? { tag: "ThreadFailed", message: answers } : answers[i]!
              return "receipt" in a
                ? Result.succeed(a.receipt)
                : Result.fail(new RetriablePublishError({ topic: request.topic, reason: `${a.tag}: ${a.message}` }))
            })
        )
      return Publisher.of({ publish })
    })
  )
