/**
 * Where a keyed record lives: the Java client's murmur2, bit for bit, and the partition it gives.
 * kafkajs's partitioner is compared in adapter-kafka (test/KeyPartition.test.ts); the in-memory
 * broker's routing in testing (test/InMemoryBroker.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { keyPartition, murmur2 } from "../src/KeyPartition.ts"

// org.apache.kafka.common.utils.UtilsTest#testMurmur2 (signed 32-bit).
const javaVectors: ReadonlyArray<[string, number]> = [
  ["21", -973932308],
  ["foobar", -790332482],
  ["a-little-bit-long-string", -985981536],
  ["a-little-bit-longer-string", -1486304829],
  ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
  ["abc", 479470107]
]

describe("KeyPartition", () => {
  it("computes the Java client's murmur2 on its own test vectors", () => {
    for (const [key, hash] of javaVectors) assert.strictEqual(murmur2(new TextEncoder().encode(key)), hash, key)
  })

  it("gives a key toPositive(murmur2) modulo the partition count, as the Java client does", () => {
    for (const [key, hash] of javaVectors) {
      for (const count of [1, 3, 7, 12]) assert.strictEqual(keyPartition(key, count), (hash & 0x7fffffff) % count, key)
    }
  })

  it("hashes only the first `length` bytes it is given (a reused buffer's stale tail is ignored)", () => {
    const buffer = new TextEncoder().encode("foobar-and-a-stale-tail")
    assert.strictEqual(murmur2(buffer, 6), -790332482)
  })

  it("gives long keys, past the buffer it keeps, and short keys after them the partition of their bytes", () => {
    const long = "ключ-".repeat(20_000) // 200,000 bytes of UTF-8: encoded into an array of its own
    const medium = "ключ-".repeat(300) // 3,000 bytes: the kept buffer grows for it
    for (const key of [long, medium, "abc"]) {
      assert.strictEqual(keyPartition(key, 12), (murmur2(new TextEncoder().encode(key)) & 0x7fffffff) % 12)
    }
    assert.strictEqual(keyPartition("abc", 12), (479470107 & 0x7fffffff) % 12)
  })

  it("refuses a partition count that is not a positive integer, saying what it got", () => {
    for (const count of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => keyPartition("abc", count), RangeError, `got ${count}`)
    }
  })
})
