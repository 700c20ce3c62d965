import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Telemetry from "../src/Telemetry.ts"

describe("Telemetry trace context (R8.2)", () => {
  const span = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", sampled: true }

  it("formats a span as a W3C traceparent", () => {
    assert.strictEqual(Telemetry.formatTraceparent(span), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    assert.strictEqual(
      Telemetry.formatTraceparent({ ...span, sampled: false }),
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    )
  })

  it("parses a traceparent back into a parent span", () => {
    const parsed = Telemetry.parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    assert.isTrue(Option.isSome(parsed))
    const parent = Option.getOrThrow(parsed)
    assert.strictEqual(parent.traceId, span.traceId)
    assert.strictEqual(parent.spanId, span.spanId)
    assert.isTrue(parent.sampled)
  })

  it("rejects malformed values, version ff and all-zero ids", () => {
    for (const bad of [
      "",
      "garbage",
      "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", // short trace id
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"
    ])
      assert.isTrue(Option.isNone(Telemetry.parseTraceparent(bad)), bad)
  })

  it.effect("injects the current span into headers, and a consumer continues that trace", () =>
    Effect.gen(function* () {
      const { headers, producer } = yield* Effect.gen(function* () {
        const producer = yield* Effect.currentSpan
        const headers = yield* Telemetry.injectTraceparent({ "event-id": "e1" })
        return { headers, producer }
      }).pipe(Effect.withSpan("enqueue"))
      assert.strictEqual(headers["event-id"], "e1")
      assert.strictEqual(headers.traceparent, Telemetry.formatTraceparent(producer))
      const consumer = yield* Effect.currentSpan.pipe(
        Effect.withSpan("consume"),
        Telemetry.withParentFromHeaders(headers)
      )
      assert.strictEqual(consumer.traceId, producer.traceId)
      const parent = Option.getOrThrow(consumer.parent)
      assert.strictEqual(parent.spanId, producer.spanId)
    })
  )

  it.effect("leaves headers alone without a span or when a traceparent is already set", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* Telemetry.injectTraceparent({ a: "1" }), { a: "1" })
      const preset = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }
      assert.deepStrictEqual(yield* Telemetry.injectTraceparent(preset).pipe(Effect.withSpan("x")), preset)
    })
  )
})
