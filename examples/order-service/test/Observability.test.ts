// The console export of the order service (`Observability.console`, the OpenTelemetry SDK through
// `@effect/opentelemetry`): with nothing else configured, finished spans are printed to the
// console by the SDK's ConsoleSpanExporter, with their parent and trace.

import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { vi } from "vitest"
import * as Observability from "../src/Observability.ts"

describe("order service console export", () => {
  it.live("Observability.console prints every finished span, child and parent in one trace", () =>
    Effect.gen(function* () {
      const printed: Array<{ traceId: string; id: string; parentSpanContext?: { spanId: string }; name: string }> = []
      const dir = vi.spyOn(console, "dir").mockImplementation((value) => void printed.push(value as never))
      yield* Effect.sleep("1 millis").pipe(
        Effect.withSpan("outbox.enqueue"),
        Effect.withSpan("POST /orders"),
        Effect.provide(Observability.console({ serviceName: "order-service", exportInterval: "1 hour" })),
        Effect.ensuring(Effect.sync(() => dir.mockRestore()))
      )
      const spans = printed.filter((value) => typeof value?.name === "string" && typeof value?.traceId === "string")
      const enqueue = spans.find((s) => s.name === "outbox.enqueue")
      const request = spans.find((s) => s.name === "POST /orders")
      assert.isDefined(enqueue, JSON.stringify(printed))
      assert.isDefined(request)
      assert.strictEqual(enqueue!.traceId, request!.traceId)
      assert.strictEqual(enqueue!.parentSpanContext?.spanId, request!.id)
    })
  )
})
