import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as KeyOrder from "../src/KeyOrder.ts"

interface Row {
  readonly id: number
  readonly key: string | null
}

const rows = (...keys: Array<string | null>): Array<Row> => keys.map((key, id) => ({ id, key }))

// A row's decision is whether it failed; a failure holds its key.
const walkFailures = (batch: ReadonlyArray<Row>, failed: ReadonlySet<number>) =>
  KeyOrder.walk(
    batch,
    (row) => (failed.has(row.id) ? "failed" : "ok"),
    (decision) => decision === "failed"
  )

describe("KeyOrder", () => {
  it("with no failure every row is decided on its own, in order", () => {
    const steps = walkFailures(rows("a", "b", "a", null), new Set())
    assert.deepStrictEqual(
      steps.map((s) => [s._tag, s.row.id, s.decision]),
      [
        ["decided", 0, "ok"],
        ["decided", 1, "ok"],
        ["decided", 2, "ok"],
        ["decided", 3, "ok"]
      ]
    )
  })

  it("after a key's first failure its later rows are held behind it; other keys go on", () => {
    const steps = walkFailures(rows("a", "a", "b", "a", "b"), new Set([1]))
    assert.deepStrictEqual(
      steps.map((s) => (s._tag === "held" ? `${s.row.id} held behind ${s.behind.id}` : `${s.row.id} ${s.decision}`)),
      ["0 ok", "1 failed", "2 ok", "3 held behind 1", "4 ok"]
    )
  })

  it("a held row carries the decision of the row that holds it and is not decided itself", () => {
    let decided = 0
    const steps = KeyOrder.walk(
      rows("a", "a", "a"),
      (row) => {
        decided++
        return row.id === 0 ? { fate: "leave" } : { fate: "publish" }
      },
      (d) => d.fate === "leave"
    )
    assert.strictEqual(decided, 1)
    assert.deepStrictEqual(
      steps.map((s) => s.decision.fate),
      ["leave", "leave", "leave"]
    )
  })

  it("rows without a key are never held", () => {
    const steps = walkFailures(rows(null, null, null), new Set([0, 1]))
    assert.deepStrictEqual(
      steps.map((s) => s._tag),
      ["decided", "decided", "decided"]
    )
  })

  it.effect.prop(
    "per key, the decided rows form a prefix, and only the last of that prefix may hold",
    [Schema.Array(Schema.Struct({ key: Schema.Literals(["a", "b", "c"]), failed: Schema.Boolean }))],
    ([spec]) =>
      Effect.sync(() => {
        const batch = spec.map(({ key }, id) => ({ id, key }))
        const failed = new Set(spec.flatMap((s, id) => (s.failed ? [id] : [])))
        const steps = walkFailures(batch, failed)
        for (const key of ["a", "b", "c"]) {
          const ofKey = steps.filter((s) => s.row.key === key)
          const firstHeld = ofKey.findIndex((s) => s._tag === "held")
          const prefix = firstHeld === -1 ? ofKey : ofKey.slice(0, firstHeld)
          assert.isTrue(ofKey.slice(prefix.length).every((s) => s._tag === "held"))
          assert.isTrue(prefix.slice(0, -1).every((s) => s.decision === "ok"))
          if (firstHeld !== -1) assert.strictEqual(prefix[prefix.length - 1]!.decision, "failed")
        }
      })
  )
})
