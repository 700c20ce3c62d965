/**
 * A string's UTF-8 written into a buffer kept between calls (no array per call), for the hot
 * paths that only read the bytes before their next call (the log record's metadata, a key's hash).
 * The buffer grows for longer strings up to `kept` bytes; a longer string gets an array of its own,
 * so one huge header or key does not pin its size for the life of the process.
 *
 * @internal
 */
const encoder = new TextEncoder()

/** An encoder with its own kept buffer: each result is a view valid until the next call. */
export const scratchEncoder = (initial: number, kept: number): ((text: string) => Uint8Array) => {
  let scratch = new Uint8Array(initial)
  return (text) => {
    const bound = text.length * 3 // UTF-8 takes at most 3 bytes per UTF-16 code unit
    if (bound > kept) return encoder.encode(text)
    if (bound > scratch.length) scratch = new Uint8Array(bound)
    return scratch.subarray(0, encoder.encodeInto(text, scratch).written)
  }
}
