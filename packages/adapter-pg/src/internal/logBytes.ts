/** Reading the binary pgoutput protocol: big-endian integers, C strings, byte runs. */

const decoder = new TextDecoder()

export interface Reader {
  readonly u8: () => number
  readonly u16: () => number
  readonly u32: () => number
  readonly cstring: () => string
  readonly bytes: (length: number) => Uint8Array
}

/** A cursor over `data` from `at`; reading past the end throws a RangeError. */
export const reader = (data: Uint8Array, at: number): Reader => {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  let offset = at
  const take = (n: number) => {
    if (offset + n > data.byteLength) throw new RangeError(`message ends at ${data.byteLength}, needed ${offset + n}`)
    const start = offset
    offset += n
    return start
  }
  return {
    u8: () => view.getUint8(take(1)),
    u16: () => view.getUint16(take(2)),
    u32: () => view.getUint32(take(4)),
    cstring: () => {
      const end = data.indexOf(0, offset)
      if (end < 0) throw new RangeError("unterminated string")
      const text = decoder.decode(data.subarray(offset, end))
      offset = end + 1
      return text
    },
    bytes: (length) => data.subarray(take(length), offset)
  }
}

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"))

/** 16 bytes as a hyphenated lower-case UUID. */
export const uuidText = (b: Uint8Array): string => {
  if (b.byteLength !== 16) return text(b)
  const h = (i: number) => HEX[b[i]!]!
  return (
    `${h(0)}${h(1)}${h(2)}${h(3)}-${h(4)}${h(5)}-${h(6)}${h(7)}-${h(8)}${h(9)}-` +
    `${h(10)}${h(11)}${h(12)}${h(13)}${h(14)}${h(15)}`
  )
}

export const text = (b: Uint8Array): string => decoder.decode(b)

const HEX_CODES = Array.from("0123456789abcdef", (c) => c.charCodeAt(0))

/**
 * Whether `value` is `uuidText` of the 16 bytes at `data[start]`, compared character by character
 * without building that text (the relay checks every record's id against its row's).
 */
export const isUuidTextOf = (value: unknown, data: Uint8Array, start: number): boolean => {
  if (typeof value !== "string" || value.length !== 36) return false
  let at = 0
  for (let i = 0; i < 16; i++) {
    if (at === 8 || at === 13 || at === 18 || at === 23) {
      if (value.charCodeAt(at++) !== 0x2d) return false
    }
    const b = data[start + i]!
    if (value.charCodeAt(at) !== HEX_CODES[b >> 4] || value.charCodeAt(at + 1) !== HEX_CODES[b & 15]) return false
    at += 2
  }
  return true
}

/** bytea's text form (`\x` then hex), as a server that ignores `binary` sends it. */
export const fromHexText = (b: Uint8Array): Uint8Array => {
  const hex = text(b)
  if (!hex.startsWith("\\x")) return b
  return Uint8Array.from(Buffer.from(hex.slice(2), "hex"))
}
