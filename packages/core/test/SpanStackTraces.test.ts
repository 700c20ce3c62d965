// The library's spans on the running paths capture no stack trace (docs/telemetry.md): one would
// only name a line of this library, and capturing it cost ~4 µs of node CPU per span, 14 µs under
// load — the log engine's enqueue span alone was 43 µs of node CPU per business transaction at 16
// clients. Effect records a span's captured trace in the fiber's stack frames
// (`References.CurrentStackFrame`), so code running inside the spans can see whether one was taken.
// The caller's own span keeps Effect's default, which shows the probe sees captured traces.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryLog from "@effect-outbox/testing/InMemoryLog"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as LogOutbox from "../src/LogOutbox.ts"
import { LogWriter } from "../src/LogWriter.ts"
import * as Outbox from "../src/Outbox.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import { Transactor } from "../src/Transactor.ts"
import * as WakeUp from "../src/WakeUp.ts"
import { Shipments, shippingRuntime } from "./support/shipping.ts"

/** The spans around the running code, innermost first: name, and whether a trace was captured. */
type Frames = ReadonlyArray<{ readonly name: string; readonly captured: boolean }>

const currentFrames: Effect.Effect<Frames> = Effect.withFiber((fiber) => {
  const frames: Array<{ name: string; captured: boolean }> = []
  for (let f = fiber.getRef(References.CurrentStackFrame); f !== undefined; f = f.parent) {
    frames.push({ name: f.name, captured: f.stack() !== undefined })
  }
  return Effect.succeed(frames)
})

const frameNamed = (frames: Frames, name: string) => {
  const found = frames.find((frame) => frame.name === name)
  assert.isDefined(found, `a span ${name} around the code (saw ${frames.map((f) => f.name).join(", ")})`)
  return found!
}

const bytes = new TextEncoder().encode('{"orderId":"o-1"}')

describe("span stack traces", () => {
  it.effect("the log engine's outbox.enqueue takes none; the caller's span keeps Effect's default", () =>
    Effect.gen(function* () {
      const log = yield* InMemoryLog.make
      let seen: Frames = []
      const writer = Layer.succeed(LogWriter)(
        LogWriter.of({
          emit: (messages) =>
            Effect.flatMap(currentFrames, (frames) => {
              seen = frames
              return log.commit(messages)
            })
        })
      )
      const transactor = Layer.succeed(Transactor)(Transactor.of({ withTransaction: (effect) => effect }))
      yield* Outbox.withTransaction(Outbox.enqueue({ topic: "orders", key: "k", payload: bytes })).pipe(
        Effect.withSpan("POST /orders"),
        Effect.provide(LogOutbox.layerWith().pipe(Layer.provide(Layer.merge(writer, transactor))))
      )
      assert.isFalse(frameNamed(seen, Telemetry.spans.enqueue).captured)
      assert.isTrue(frameNamed(seen, "POST /orders").captured)
    })
  )

  it.live("the claim engine's outbox.enqueue and the consumer's record and handler spans take none", () =>
    Effect.gen(function* () {
      let atEnqueue: Frames = []
      const handled = yield* Deferred.make<Frames>()
      // The claim engine wakes the relays inside its enqueue span: the probe rides on the wake-up.
      const wakeUp = Layer.effect(WakeUp.WakeUp)(
        Effect.gen(function* () {
          const inner = yield* WakeUp.WakeUp
          return WakeUp.WakeUp.of({
            notify: Effect.flatMap(currentFrames, (frames) => {
              atEnqueue = frames
              return inner.notify
            }),
            signals: inner.signals
          })
        })
      ).pipe(Layer.provide(WakeUp.layerMemory))
      const runtime = shippingRuntime(
        () => Effect.flatMap(currentFrames, (frames) => Deferred.succeed(handled, frames)),
        { wakeUp }
      )
      const inHandler = yield* Effect.gen(function* () {
        yield* Outbox.withTransaction(Topic.enqueue(Shipments, { orderId: "o-1" })).pipe(
          Effect.withSpan("POST /orders")
        )
        return yield* Deferred.await(handled).pipe(Effect.timeout("10 seconds"))
      }).pipe(Effect.provide(runtime))

      assert.isFalse(frameNamed(atEnqueue, Telemetry.spans.enqueue).captured)
      assert.isTrue(frameNamed(atEnqueue, "POST /orders").captured)
      assert.isFalse(frameNamed(inHandler, Telemetry.spans.consumerHandler).captured)
      assert.isFalse(frameNamed(inHandler, Telemetry.spans.consumerRecord).captured)
    })
  )
})
