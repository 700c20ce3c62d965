/**
 * The kafkajs publisher's key → partition (core's `KeyPartition`, computed before sending): it must
 * put every key exactly where kafkajs's own default partitioner puts it, or switching to or from
 * this adapter would move keys between partitions and break their order. The Java client's own
 * vectors are checked in core (test/KeyPartition.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import Kafkajs from "kafkajs"

const kafkajsPartition = (key: string, count: number) =>
  Kafkajs.Partitioners.DefaultPartitioner()({
    topic: "t",
    partitionMetadata: Array.from({ length: count }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      replicas: [0],
      isr: [0],
      partitionErrorCode: 0
    })),
    message: { key, value: null }
  })

// A deterministic generator (xorshift), so a failure names a key that reproduces.
const random = (seed: number) => () => {
  seed ^= seed << 13
  seed ^= seed >>> 17
  seed ^= seed << 5
  return (seed >>> 0) / 0x1_0000_0000
}

const keys = (count: number): Array<string> => {
  const next = random(0x2545f491)
  const alphabets = [
    "abcdefghijklmnopqrstuvwxyz0123456789-_:",
    "äöüßéèçñø€",
    "日本語の鍵",
    "😀🚀🧪", // astral: surrogate pairs
    "\ud800\udc00\udfff" // a pair and a lone low surrogate (both clients write U+FFFD for it)
  ]
  return Array.from({ length: count }, () => {
    const alphabet = alphabets[Math.floor(next() * alphabets.length)]!
    const chars = Array.from(alphabet)
    // Lengths past the 256-byte scratch buffer too, and every length mod 4.
    const length = Math.floor(next() ** 3 * 400)
    return Array.from({ length }, () => chars[Math.floor(next() * chars.length)]).join("")
  })
}

describe("keyPartition", () => {
  it("puts every key on the partition kafkajs's default partitioner gives it", () => {
    const sample = ["", "a", "ab", "abc", "abcd", "order-1", "user-42", ...keys(5_000), "ключ-".repeat(20_000)]
    for (const [i, key] of sample.entries()) {
      const count = 1 + (i % 64)
      assert.strictEqual(keyPartition(key, count), kafkajsPartition(key, count), JSON.stringify(key))
    }
  })
})
