/**
 * Kafka's default key partitioner: `toPositive(murmur2(utf8(key))) % partitions`, in 32-bit
 * integer arithmetic as the Java client computes it, so the in-memory broker routes keys the way a
 * real producer does.
 *
 * @internal
 */
const SEED = 0x9747b28c
const M = 0x5bd1e995

export const murmur2 = (data: Uint8Array): number => {
  const length = data.length
  let h = SEED ^ length
  const length4 = Math.floor(length / 4)
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4
    let k =
      (data[i4]! & 0xff) |
      ((data[i4 + 1]! & 0xff) << 8) |
      ((data[i4 + 2]! & 0xff) << 16) |
      ((data[i4 + 3]! & 0xff) << 24)
    k = Math.imul(k, M)
    k ^= k >>> 24
    k = Math.imul(k, M)
    h = Math.imul(h, M)
    h ^= k
  }
  const tail = length & ~3
  const rest = length % 4
  if (rest >= 3) h ^= (data[tail + 2]! & 0xff) << 16
  if (rest >= 2) h ^= (data[tail + 1]! & 0xff) << 8
  if (rest >= 1) {
    h ^= data[tail]! & 0xff
    h = Math.imul(h, M)
  }
  h ^= h >>> 13
  h = Math.imul(h, M)
  h ^= h >>> 15
  return h | 0
}

export const partitionForKey = (key: string, partitions: number): number =>
  (murmur2(new TextEncoder().encode(key)) & 0x7fffffff) % partitions
