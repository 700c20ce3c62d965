/**
 * Per-event publish spans. A relay publishes a batch of events that belong to many
 * traces, so its own batch span cannot be the parent of any one of them. This decorator gives
 * each event with a `traceparent` header a `outbox.publish` span (kind `producer`) in that
 * event's own trace, covering the broker call and carrying the receipt — so one trace reads
 * enqueue → publish → consume. `OutboxRuntime` installs it for its relays.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Tracer from "effect/Tracer"
import type { Publisher } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"

/**
 * Wraps a publisher so every request with a valid `traceparent` gets its own span in its trace.
 * Outcomes are passed through unchanged.
 *
 * @since 0.1.0
 * @category constructors
 */
export const traced = (publisher: Publisher["Service"]): Publisher["Service"] => ({
  publish: (requests) =>
    Effect.gen(function* () {
      const spans: Array<Tracer.Span | undefined> = yield* Effect.forEach(requests, (request) =>
        Option.match(Telemetry.parentFromHeaders(request.headers), {
          onNone: () => Effect.succeed(undefined),
          onSome: (parent) =>
            Effect.makeSpan(Telemetry.spans.publishEvent, {
              parent,
              kind: "producer",
              attributes: {
                "messaging.system": "kafka",
                "messaging.destination.name": request.topic,
                "outbox.event_id": request.id,
                ...(request.key === null ? {} : { "messaging.kafka.message.key": request.key })
              }
            })
        })
      )
      const exit = yield* Effect.exit(publisher.publish(requests))
      const end = yield* Clock.currentTimeNanos
      for (let i = 0; i < requests.length; i++) {
        const span = spans[i]
        if (span === undefined) continue
        if (Exit.isFailure(exit)) {
          span.end(end, exit)
          continue
        }
        const outcome = exit.value[i]
        if (outcome === undefined) span.end(end, Exit.void)
        else if (outcome._tag === "Success") {
          span.attribute("messaging.kafka.destination.partition", outcome.success.partition)
          span.attribute("messaging.kafka.message.offset", outcome.success.offset)
          span.end(end, Exit.void)
        } else {
          span.attribute("error.type", outcome.failure._tag)
          span.end(end, Exit.fail(outcome.failure))
        }
      }
      return yield* exit
    })
})
