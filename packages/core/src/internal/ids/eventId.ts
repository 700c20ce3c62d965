/**
 * The UUIDv7 of `OutboxMessage.makeEventId` as plain code, for callers that already hold the
 * fiber (`Outbox.prepare` runs once per enqueue and reads the clock and the random source once).
 */
import type * as Random from "effect/Random"

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"))

/**
 * A UUIDv7 for `millis` with its random bits from `random`: ten draws in order, each
 * `Random.nextIntBetween(0, 255)`'s, so a seeded `Random` replays the same ids as before.
 */
export const eventIdAt = (millis: number, random: Random.Random): string => {
  const bytes = new Array<number>(16)
  for (let i = 6; i < 16; i++) bytes[i] = Math.floor(random.nextDoubleUnsafe() * 256)
  let ts = Math.max(0, Math.trunc(millis))
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ts % 256
    ts = Math.floor(ts / 256)
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const h = (i: number) => HEX[bytes[i]!]!
  return (
    `${h(0)}${h(1)}${h(2)}${h(3)}-${h(4)}${h(5)}-${h(6)}${h(7)}-${h(8)}${h(9)}-` +
    `${h(10)}${h(11)}${h(12)}${h(13)}${h(14)}${h(15)}`
  )
}
