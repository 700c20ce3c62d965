/**
 * The Confluent wire format every Schema Registry serializer reads: a magic byte `0`, the schema id
 * as a 4-byte big-endian integer, then the payload in the schema's format (Avro binary, JSON text).
 *
 * @since 0.1.0
 */

/**
 * The first byte of every framed payload.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAGIC_BYTE = 0

/**
 * A framed payload taken apart.
 *
 * @since 0.1.0
 * @category models
 */
export interface Framed {
  readonly schemaId: number
  readonly body: Uint8Array
}

/**
 * Frames a payload with its schema id.
 *
 * @since 0.1.0
 * @category encoding
 */
export const frame = (schemaId: number, body: Uint8Array): Uint8Array => {
  const bytes = new Uint8Array(5 + body.length)
  const view = new DataView(bytes.buffer)
  view.setUint8(0, MAGIC_BYTE)
  view.setInt32(1, schemaId, false)
  bytes.set(body, 5)
  return bytes
}

/**
 * Takes a framed payload apart; for a payload that is not framed (too short, another first
 * byte), a sentence saying what it got.
 *
 * @since 0.1.0
 * @category decoding
 */
export const unframe = (bytes: Uint8Array): Framed | string => {
  if (bytes.length < 5) return `${bytes.length} bytes: too short for the Schema Registry wire format`
  if (bytes[0] !== MAGIC_BYTE) return `first byte ${bytes[0]}, not the Schema Registry magic byte 0`
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  return { schemaId: view.getInt32(1, false), body: bytes.subarray(5) }
}
