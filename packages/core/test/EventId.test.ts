import { assert, describe, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { EventId, isEventId } from "../src/OutboxMessage.ts"

const bySchema = Schema.is(EventId)

describe("isEventId, the library's one event id check", () => {
  it("answers as the EventId schema does", () => {
    const hex = "0123456789abcdefABCDEF"
    const candidates: Array<unknown> = [
      "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b",
      "0193A0B1-C2D3-7E4F-8A5B-6C7D8E9F0A1B",
      "0193a0b1-c2d3-8e4f-b000-000000000000",
      "00000000-0000-0000-0000-000000000000",
      "ffffffff-ffff-ffff-ffff-ffffffffffff",
      "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
      "0193a0b1-c2d3-0e4f-8a5b-6c7d8e9f0a1b", // version 0
      "0193a0b1-c2d3-9e4f-8a5b-6c7d8e9f0a1b", // version 9
      "0193a0b1-c2d3-7e4f-7a5b-6c7d8e9f0a1b", // variant 7
      "0193a0b1-c2d3-7e4f-ca5b-6c7d8e9f0a1b", // variant c
      "0193a0b1c2d37e4f8a5b6c7d8e9f0a1b",
      "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b\n",
      " 0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b",
      "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1",
      "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1bb",
      "g193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b",
      "",
      "not-a-uuid",
      null,
      undefined,
      42,
      {},
      ["0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b"]
    ]
    // and valid ids with one or two characters replaced at random (hex of both cases and others)
    let seed = 7
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed
    }
    const alphabet = `${hex}gz-`
    const valid = "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b"
    for (let n = 0; n < 2_000; n++) {
      const chars = [...valid]
      for (let k = 0; k <= n % 2; k++) chars[next() % chars.length] = alphabet[next() % alphabet.length]!
      candidates.push(chars.join(""))
    }
    for (const value of candidates) assert.strictEqual(isEventId(value), bySchema(value), JSON.stringify(value))
    assert.isTrue(candidates.filter(isEventId).length > 10, "the random shapes include ids")
    assert.isTrue(candidates.filter((c) => !isEventId(c)).length > 10, "and strings that are not")
  })
})
