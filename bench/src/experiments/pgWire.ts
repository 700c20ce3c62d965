/**
 * Counts what a process sends to PostgreSQL: the frontend protocol messages written to sockets
 * on port 5432 — round trips (`Sync` / simple `Query`, each waits for ReadyForQuery) and the
 * statements executed (`Bind` of a parsed statement, by text). For the experiments only.
 */
import { Socket } from "node:net"

export interface Tally {
  roundTrips: number
  writes: number
  statements: Map<string, number>
}
let tally: Tally | undefined
const names = new Map<string, string>()

const cstring = (buf: Buffer, at: number): [string, number] => {
  const end = buf.indexOf(0, at)
  return [buf.toString("utf8", at, end), end + 1]
}
const count = (text: string) => {
  const short = text.replace(/\s+/g, " ").slice(0, 70)
  if (tally !== undefined) tally.statements.set(short, (tally.statements.get(short) ?? 0) + 1)
}

// Frontend messages: type byte, int32 length (itself included), body.
const write = Socket.prototype.write
Socket.prototype.write = function (this: Socket, chunk: unknown, ...rest: Array<never>) {
  if (this.remotePort === 5432 && chunk instanceof Uint8Array && chunk.length > 0 && chunk[0] !== 0) {
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (tally !== undefined) tally.writes++
    let at = 0
    while (at + 5 <= buf.length) {
      const type = String.fromCharCode(buf[at]!)
      const length = buf.readInt32BE(at + 1)
      const body = at + 5
      if (type === "P") {
        const [name, next] = cstring(buf, body)
        names.set(name, cstring(buf, next)[0])
      } else if (tally === undefined) {
        // not counting: only statement names are learned
      } else if (type === "B") {
        const [, next] = cstring(buf, body)
        count(names.get(cstring(buf, next)[0]) ?? "?")
      } else if (type === "Q") {
        tally.roundTrips++
        count(cstring(buf, body)[0])
      } else if (type === "S") tally.roundTrips++
      at += 1 + length
    }
  }
  return write.call(this, chunk as never, ...rest)
} as typeof Socket.prototype.write

/** Starts counting (statement names are learned all the time). */
export const start = (): void => {
  tally = { roundTrips: 0, writes: 0, statements: new Map() }
}

/** Stops counting and returns the tally. */
export const stop = (): Tally => {
  const t = tally!
  tally = undefined
  return t
}

/** Prints a tally per message. */
export const print = (label: string, t: Tally, messages: number): void => {
  console.log(
    `${label}: ${(t.roundTrips / messages).toFixed(2)} round trips/message, ${(t.writes / messages).toFixed(2)} socket writes/message`
  )
  for (const [text, n] of t.statements) console.log(`    ${(n / messages).toFixed(2)} × ${text}`)
}
