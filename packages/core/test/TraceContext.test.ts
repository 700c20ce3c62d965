// R8.2: one trace spans enqueue -> publish -> consume. The enqueueing span's W3C traceparent is
// stored with the event, travels in the record's headers, the relay's per-event publish span and
// the consumer's handler span both continue that trace.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"
import * as Outbox from "../src/Outbox.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import { Shipments, shippingRuntime } from "./support/shipping.ts"

/** The native tracer, remembering every span it starts. */
const recordingTracer = () => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span(options) {
      const span = Tracer.nativeTracer.span.call(Tracer.nativeTracer, options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

const parentId = (span: Tracer.Span) => Option.getOrUndefined(Option.map(span.parent, (p) => p.spanId))

describe("trace context", () => {
  it.live("one trace id spans the enqueueing request, the publication and the consumer's handler", () => {
    const { spans, tracer } = recordingTracer()
    return Effect.gen(function* () {
      const handled = yield* Deferred.make<Tracer.Span>()
      const runtime = shippingRuntime(
        () => Effect.flatMap(Effect.currentSpan, (span) => Deferred.succeed(handled, span)),
        { fromBeginning: true }
      )

      yield* Effect.gen(function* () {
        // The request that places the order: its span is the root of the trace.
        const request = yield* Effect.gen(function* () {
          yield* Outbox.withTransaction(Topic.enqueue(Shipments, { orderId: "o-1" }))
          return yield* Effect.currentSpan
        }).pipe(Effect.withSpan("POST /orders"))
        const handler = yield* Deferred.await(handled).pipe(Effect.timeout("10 seconds"))
        const broker = yield* InMemoryBroker.InMemoryBroker
        const [record] = yield* broker.records("shipments")

        const trace = request.traceId
        const enqueue = spans.find((s) => s.name === Telemetry.spans.enqueue)!
        const publish = spans.find((s) => s.name === Telemetry.spans.publishEvent)!
        assert.isDefined(enqueue)
        assert.isDefined(publish)

        // The header on the broker record: W3C format, this trace, the enqueue span as parent.
        const traceparent = record!.headers[Telemetry.TRACEPARENT_HEADER]!
        assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
        assert.strictEqual(traceparent, `00-${trace}-${enqueue.spanId}-01`)

        // One trace: request -> enqueue -> publish, and -> the consumer's handler.
        assert.deepStrictEqual(
          new Set([request.traceId, enqueue.traceId, publish.traceId, handler.traceId]),
          new Set([trace])
        )
        assert.strictEqual(parentId(enqueue), request.spanId)
        assert.strictEqual(parentId(publish), enqueue.spanId)
        assert.strictEqual(publish.kind, "producer")
        assert.strictEqual(publish.attributes.get("messaging.kafka.message.offset"), record!.offset)
        assert.strictEqual(handler.name, "outbox.consumer.handler")
        assert.strictEqual(parentId(handler), enqueue.spanId)
      }).pipe(Effect.provide(runtime), Effect.scoped)
    }).pipe(Effect.provideService(Tracer.Tracer, tracer), Effect.provideService(References.MinimumLogLevel, "Warn"))
  })
})
