// The dead-letter pages as pure renderings: a payload that is not UTF-8 shows as hex, a long one is
// cut with a note, hostile headers and error classes are escaped, the page's classes are counted,
// and read-only mode offers neither a replay nor a discard.
import { assert, describe, it } from "@effect/vitest"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Option from "effect/Option"
import * as DeadLetterPages from "../src/internal/dashboard/deadLetterPages.ts"

const hostile = `<script>alert("x")</script>`

const letter = (offset: number, errorClass: string, value: Uint8Array) =>
  Option.getOrThrow(
    DeadLetter.parse({
      topic: "orders.DLT",
      partition: 0,
      offset: String(offset),
      key: "k",
      headers: {
        "event-id": `01a23c25-a297-7b48-8292-3d8fa51089b${offset}`,
        "x-note": hostile,
        [DeadLetter.headers.originalTopic]: "orders",
        [DeadLetter.headers.errorClass]: errorClass
      },
      value,
      timestamp: 0
    })
  )

const page = (l: DeadLetter.DeadLetter, readOnly = false) =>
  DeadLetterPages.letter({ base: "", topic: "orders.DLT", letter: l, handled: [], readOnly })

describe("dead-letter pages", () => {
  it("a payload that is not UTF-8 shows as hex; a long text payload is cut at the limit with a note", () => {
    const binary = page(letter(1, "E", new Uint8Array([0xff, 0xfe, 0x00, 0x41])))
    assert.include(binary, `data-payload-kind="binary"`)
    assert.include(binary, "fffe0041")
    const long = page(letter(2, "E", new TextEncoder().encode(`{"a":"${"y".repeat(DeadLetterPages.payloadLimit)}"}`)))
    assert.include(
      long,
      `showing the first ${DeadLetterPages.payloadLimit} of ${DeadLetterPages.payloadLimit + 8} bytes`
    )
    assert.include(long, `data-payload-kind="text"`, "a cut JSON document is shown as text")
    // Cut inside a two-byte character: still text.
    const accents = page(letter(3, "E", new TextEncoder().encode(`x${"é".repeat(DeadLetterPages.payloadLimit)}`)))
    assert.include(accents, `data-payload-kind="text"`)
    assert.include(accents, "data-payload-truncated")
  })

  it("headers and error classes are escaped; the page's classes are counted; read-only offers no action", () => {
    const letters = [
      letter(1, hostile, new Uint8Array()),
      letter(2, "Refused", new Uint8Array()),
      letter(3, "Refused", new Uint8Array())
    ]
    const one = page(letters[0]!)
    assert.notInclude(one, "<script>")
    assert.include(one, "&lt;script&gt;")
    assert.include(one, "Discard…")
    assert.notInclude(page(letters[0]!, true), "Discard…")
    const list = (readOnly: boolean) =>
      DeadLetterPages.list({
        base: "",
        topic: "orders.DLT",
        letters,
        handled: new Map(),
        readOnly,
        errorClass: undefined,
        page: { skip: 0, size: 100, more: false }
      })
    assert.include(list(false), `data-class-count="Refused">2<`)
    assert.notInclude(list(false), "<script>")
    assert.include(list(false), "Discard selected…")
    assert.notInclude(list(true), "Discard selected…")
    assert.notInclude(list(true), "Replay selected…")
  })
})
