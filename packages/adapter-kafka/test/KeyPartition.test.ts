/**
 * The publisher's key → partition: the Java client's murmur2 in 32-bit arithmetic must put every
 * key exactly where kafkajs's default partitioner (and the Java client) puts it, or switching
 * clients would move keys between partitions and break their order.
 */
import { assert, describe, it } from "@effect/vitest"
import Kafkajs from "kafkajs"
import { keyPartition, murmur2 } from "../src/internal/keyPartition.ts"

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
  it("matches the Java client's murmur2 on its own test vectors", () => {
    // org.apache.kafka.common.utils.UtilsTest#testMurmur2
    const cases: Array<[string, number]> = [
      ["21", -973932308],
      ["foobar", -790332482],
      ["a-little-bit-long-string", -985981536],
      ["a-little-bit-longer-string", -1486304829],
      ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
      ["abc", 479470107]
    ]
    for (const [key, expected] of cases) assert.strictEqual(murmur2(new TextEncoder().encode(key)), expected, key)
  })

  it("puts every key on the partition kafkajs's default partitioner gives it", () => {
    const sample = ["", "a", "ab", "abc", "abcd", "order-1", "user-42", ...keys(5_000)]
    for (const [i, key] of sample.entries()) {
      const count = 1 + (i % 64)
      assert.strictEqual(keyPartition(key, count), kafkajsPartition(key, count), JSON.stringify(key))
    }
  })

  it("hashes a key past the buffer it keeps, and short keys after it, as kafkajs does", () => {
    const long = "ключ-".repeat(20_000) // 200,000 bytes of UTF-8: encoded into an array of its own
    assert.strictEqual(keyPartition(long, 12), kafkajsPartition(long, 12))
    assert.strictEqual(keyPartition("order-7", 12), kafkajsPartition("order-7", 12))
  })
})
