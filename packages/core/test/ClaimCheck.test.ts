import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ClaimCheck from "../src/ClaimCheck.ts"
import type { ConsumerRecord } from "../src/ConsumerSource.ts"
import { isEventId } from "../src/OutboxMessage.ts"

const memoryStore = (thresholdBytes: number) => {
  const stored = new Map<string, Uint8Array>()
  const service = ClaimCheck.ClaimCheckStore.of({
    thresholdBytes,
    put: (reference, payload) => Effect.sync(() => void stored.set(reference, payload)),
    get: (reference) => Effect.sync(() => Option.fromNullishOr(stored.get(reference)))
  })
  return { stored, service }
}

const record = (headers: Record<string, string>, value = new Uint8Array(0)): ConsumerRecord => ({
  topic: "documents",
  partition: 0,
  offset: "7",
  key: null,
  value,
  headers,
  timestamp: 0
})

describe("ClaimCheck", () => {
  it.effect(
    "a payload over the threshold is stored aside: the draft gets its id, an empty payload and the header",
    () =>
      Effect.gen(function* () {
        const { service, stored } = memoryStore(4)
        const payload = new Uint8Array([1, 2, 3, 4, 5])
        const draft = yield* ClaimCheck.offload({ topic: "documents", payload, headers: { a: "b" } }).pipe(
          Effect.provideService(ClaimCheck.ClaimCheckStore, service)
        )
        assert(draft.id !== undefined && isEventId(draft.id))
        assert.strictEqual(draft.payload.length, 0)
        assert.deepStrictEqual(draft.headers, { a: "b", [ClaimCheck.CLAIM_CHECK_HEADER]: draft.id })
        assert.deepStrictEqual(stored.get(draft.id), payload)
      })
  )

  it.effect("a payload at the threshold, or without a store, is left as it is", () =>
    Effect.gen(function* () {
      const { service, stored } = memoryStore(5)
      const draft = { topic: "documents", payload: new Uint8Array(5) }
      assert.strictEqual(
        yield* ClaimCheck.offload(draft).pipe(Effect.provideService(ClaimCheck.ClaimCheckStore, service)),
        draft
      )
      assert.strictEqual(stored.size, 0)
      const big = { topic: "documents", payload: new Uint8Array(10_000_000) }
      assert.strictEqual(yield* ClaimCheck.offload(big), big)
    })
  )

  it.effect("rehydrate reads a referenced payload back; a record without the header keeps its value", () =>
    Effect.gen(function* () {
      const { service, stored } = memoryStore(0)
      stored.set("ref-1", new Uint8Array([9, 9]))
      const some = Option.some(service)
      assert.deepStrictEqual(
        yield* ClaimCheck.rehydrate(record({ [ClaimCheck.CLAIM_CHECK_HEADER]: "ref-1" }), some),
        new Uint8Array([9, 9])
      )
      const plain = new Uint8Array([1])
      assert.strictEqual(yield* ClaimCheck.rehydrate(record({}, plain), some), plain)
    })
  )

  it.effect("a reference the store does not hold, or no store, fails with a PayloadDecodeError saying why", () =>
    Effect.gen(function* () {
      const { service } = memoryStore(0)
      const missing = record({ [ClaimCheck.CLAIM_CHECK_HEADER]: "gone" })
      const error = yield* Effect.flip(ClaimCheck.rehydrate(missing, Option.some(service)))
      assert.strictEqual(error._tag, "PayloadDecodeError")
      assert.include(error.message, "documents/0@7")
      assert.include(error.message, "no longer holds it")
      const noStore = yield* Effect.flip(ClaimCheck.rehydrate(missing, Option.none()))
      assert.include(noStore.message, "no ClaimCheckStore")
    })
  )
})
