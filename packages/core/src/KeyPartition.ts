/**
 * Where a keyed record lives: the partition the Java client (and kafkajs's default partitioner)
 * gives it, `toPositive(murmur2(utf8(key))) % partitionCount`, in 32-bit integer arithmetic. One
 * definition for both Kafka adapters and the in-memory broker, so a key stays on its partition
 * (and in order) whichever client publishes it.
 *
 * kafkajs's own `murmur2` does the same arithmetic on its BigInt-backed `Long` and copies the key
 * into a fresh `Buffer`: about 3.5 µs of every event on the log relay's kafkajs path
 * (bench/JOURNAL.md, "The commit → publish tail, traced"), against 0.1 µs here. Every multiply
 * and xor keeps only the low 32 bits, which is all the Java algorithm (int arithmetic) uses, so
 * the result is bit for bit the same.
 *
 * @since 0.1.0
 */

import { scratchEncoder } from "./internal/bytes/utf8.ts"

const SEED = 0x9747b28c
const M = 0x5bd1e995

// The key's UTF-8 is written into a kept buffer (no array per record), up to 4 KiB.
const utf8 = scratchEncoder(256, 4096)

/**
 * The Java client's `Utils.murmur2` of the first `length` bytes of `data` (`length` ≤ its size):
 * a signed 32-bit int.
 *
 * @since 0.1.0
 * @category partitioning
 */
export const murmur2 = (data: Uint8Array, length = data.length): number => {
  let h = SEED ^ length
  const whole = length & ~3
  for (let i = 0; i < whole; i += 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24)
    k = Math.imul(k, M)
    k ^= k >>> 24
    k = Math.imul(k, M)
    h = Math.imul(h, M) ^ k
  }
  // The last 1–3 bytes (the Java algorithm's fall-through switch).
  const rest = length & 3
  if (rest === 3) h ^= data[whole + 2]! << 16
  if (rest >= 2) h ^= data[whole + 1]! << 8
  if (rest >= 1) h = Math.imul(h ^ data[whole]!, M)
  h ^= h >>> 13
  h = Math.imul(h, M)
  return h ^ (h >>> 15)
}

/**
 * The partition of `key` among `partitionCount` partitions, as the Java client computes it.
 * `partitionCount` is a topic's partition count: a positive integer, or a `RangeError`.
 *
 * @since 0.1.0
 * @category partitioning
 */
export const keyPartition = (key: string, partitionCount: number): number => {
  if (!Number.isInteger(partitionCount) || partitionCount < 1) {
    throw new RangeError(`a key's partition needs a partition count of at least 1, got ${partitionCount}`)
  }
  return (murmur2(utf8(key)) & 0x7fffffff) % partitionCount
}
