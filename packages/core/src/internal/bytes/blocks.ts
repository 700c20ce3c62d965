/**
 * Small byte arrays carved out of shared 64 KiB blocks, for the log engine's per-event bytes.
 *
 * Why: past V8's on-heap limit (64 bytes) every `new Uint8Array(n)` allocates a backing store of
 * its own, which measured 2–4 µs for a 1.3 KB event on the benches' 2-core machines (a view into a
 * block: ~0.2 µs). Encoding an event and decoding it in the relay each allocate one.
 *
 * A block lives as long as any view into it, so this is for bytes that are short-lived or die
 * with their neighbours (an event's encoding, a window's payloads), never for long-term caches.
 * Each region is handed out once, so it starts zero-filled like `new Uint8Array(n)`.
 *
 * @internal
 */
const BLOCK = 64 * 1024
/** Larger requests get an array of their own: a block is shared by at least four. */
const LARGEST = BLOCK / 4

let block = new Uint8Array(BLOCK)
let used = 0

/** `size` zeroed bytes: a view into a shared block, or a fresh array past `LARGEST`. */
export const alloc = (size: number): Uint8Array => {
  if (size > LARGEST) return new Uint8Array(size)
  if (used + size > BLOCK) {
    block = new Uint8Array(BLOCK)
    used = 0
  }
  const bytes = block.subarray(used, used + size)
  used += (size + 7) & ~7 // 8-byte aligned: a wider typed array over a view needs its offset so
  return bytes
}

/** A copy of `bytes` (see {@link alloc}). */
export const copy = (bytes: Uint8Array): Uint8Array => {
  const out = alloc(bytes.byteLength)
  out.set(bytes)
  return out
}
