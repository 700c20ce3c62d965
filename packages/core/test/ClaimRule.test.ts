// The claim rule against its contract, the `ClaimRequest` JSDoc: on generated tables of rows
// (statuses, keys, availability, locks by other transactions) and claim requests, every batch
// `selectClaimable` chooses obeys the per-key rule (safety), and it leaves nothing claimable
// behind unless the batch is full (progress), so an empty answer cannot pass.
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Schema from "effect/Schema"
import * as ClaimRule from "../src/ClaimRule.ts"
import * as Lifecycle from "../src/Lifecycle.ts"
import type { EventId, OutboxMessage } from "../src/OutboxMessage.ts"
import type { ClaimRequest } from "../src/OutboxStore.ts"

const small = (maximum: number, minimum = 0) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

/** One row as generated: its key (`null`: unordered), status, availability, and whether another transaction holds it. */
const GeneratedRow = Schema.Struct({
  key: Schema.NullOr(Schema.Literals(["a", "b", "c"])),
  status: Schema.Literals(Lifecycle.statuses),
  availableAt: small(10),
  locked: Schema.Boolean
})

// Tables of 2 to 24 rows over three keys and the null key: enough rows per key for prefixes,
// in-flight rows and FAILURE heads to meet.
const Table = Arbitrary.array(Arbitrary.schema(GeneratedRow), { minLength: 2, maxLength: 24 })

/** Many runs: each is a few microseconds, and the rule's corners need many tables to meet. */
const runs = { arbitrary: { runs: 2_000, size: 100 } }

const Request = Schema.Struct({
  limit: small(12, 1),
  maxPerKey: small(4, 1),
  now: small(10),
  failedHead: Schema.UndefinedOr(Schema.Literals(["block", "skip"]))
})

type Generated = typeof GeneratedRow.Type

const eventId = (seq: number) => `00000000-0000-7000-8000-${seq.toString(16).padStart(12, "0")}` as EventId

/** The generated rows as a table ordered by `seq`, and the locked ones. */
const table = (generated: ReadonlyArray<Generated>) => {
  const rows = generated.map(
    (row, index): OutboxMessage => ({
      id: eventId(index + 1),
      seq: index + 1,
      topic: "t",
      key: row.key,
      partition: null,
      headers: {},
      payload: new Uint8Array(),
      status: row.status,
      attempts: 0,
      availableAt: row.availableAt,
      leaseOwner: row.status === "DISPATCHING" ? "relay#other" : null,
      leaseExpiresAt: row.status === "DISPATCHING" ? 1_000 : null,
      receipt: null,
      lastError: null,
      createdAt: 0,
      updatedAt: 0,
      publishedAt: null,
      processedAt: null
    })
  )
  const locked = new Set(rows.filter((_, index) => generated[index]!.locked).map((row) => row.id))
  return { rows, lockedElsewhere: (row: OutboxMessage) => locked.has(row.id) }
}

const claimRequest = (request: typeof Request.Type): ClaimRequest => ({
  owner: "relay#1",
  leaseMillis: 30_000,
  limit: request.limit,
  maxPerKey: request.maxPerKey,
  now: request.now,
  ...(request.failedHead === undefined ? {} : { failedHead: request.failedHead })
})

/** Why the contract forbids claiming `row` in this batch, or `undefined` when nothing does. */
const heldBack = (
  row: OutboxMessage,
  rows: ReadonlyArray<OutboxMessage>,
  chosen: ReadonlySet<number>,
  request: ClaimRequest,
  lockedElsewhere: (row: OutboxMessage) => boolean
): string | undefined => {
  if (row.status !== "PENDING") return "not PENDING"
  if (row.availableAt > request.now) return "not yet available"
  if (lockedElsewhere(row)) return "held by another transaction"
  if (row.key === null) return undefined
  const sameKey = rows.filter((other) => other.key === row.key && other.seq !== row.seq)
  if (sameKey.some((other) => other.status === "DISPATCHING")) return "its key is in flight"
  if (sameKey.some((other) => other.status === "PENDING" && lockedElsewhere(other))) return "its key is held elsewhere"
  const earlier = sameKey.filter((other) => other.seq < row.seq)
  const blocking = earlier.find(
    (other) => Lifecycle.blocksKey(other.status, request.failedHead) && !chosen.has(other.seq)
  )
  if (blocking !== undefined) return `an earlier ${blocking.status} row of its key is not claimed with it`
  const before = earlier.filter((other) => chosen.has(other.seq)).length
  if (before >= request.maxPerKey) return "its key's share of the batch is taken"
  return undefined
}

describe("ClaimRule.selectClaimable (the ClaimRequest contract)", () => {
  it.prop(
    "claims only what the per-key rule allows, in seq order, at most limit rows and maxPerKey per key",
    { generated: Table, request: Request },
    ({ generated, request: raw }) => {
      const { lockedElsewhere, rows } = table(generated)
      const request = claimRequest(raw)
      const chosen = ClaimRule.selectClaimable(rows, request, lockedElsewhere)
      const chosenSeqs = new Set(chosen.map((row) => row.seq))
      assert.isAtMost(chosen.length, request.limit)
      assert.deepStrictEqual(
        chosen.map((row) => row.seq),
        [...chosenSeqs].sort((a, b) => a - b),
        "ordered by seq, each row once"
      )
      const perKey = new Map<string, number>()
      for (const row of chosen) {
        assert.strictEqual(rows[row.seq - 1], row, "a row of the table, unchanged")
        const reason = heldBack(row, rows, chosenSeqs, request, lockedElsewhere)
        assert.isUndefined(reason, `row ${row.seq} (key ${row.key}) was claimed although ${reason}`)
        if (row.key !== null) perKey.set(row.key, (perKey.get(row.key) ?? 0) + 1)
      }
      for (const [key, count] of perKey) assert.isAtMost(count, request.maxPerKey, `key ${key}`)
    },
    runs
  )

  it.prop(
    "leaves nothing claimable behind unless the batch is full",
    { generated: Table, request: Request },
    ({ generated, request: raw }) => {
      const { lockedElsewhere, rows } = table(generated)
      const request = claimRequest(raw)
      const chosen = ClaimRule.selectClaimable(rows, request, lockedElsewhere)
      if (chosen.length === request.limit) return
      const chosenSeqs = new Set(chosen.map((row) => row.seq))
      for (const row of rows) {
        if (chosenSeqs.has(row.seq)) continue
        assert.isDefined(
          heldBack(row, rows, chosenSeqs, request, lockedElsewhere),
          `row ${row.seq} (key ${row.key}, ${row.status}) was claimable and left behind`
        )
      }
    },
    runs
  )

  it("a FAILURE head holds back its key under the default policy, and not under failedHead skip", () => {
    const { lockedElsewhere, rows } = table([
      { key: "a", status: "FAILURE", availableAt: 0, locked: false },
      { key: "a", status: "PENDING", availableAt: 0, locked: false },
      { key: "b", status: "PREQUEUED", availableAt: 0, locked: false },
      { key: "b", status: "PENDING", availableAt: 0, locked: false }
    ])
    const base = claimRequest({ limit: 10, maxPerKey: 5, now: 0, failedHead: undefined })
    assert.deepStrictEqual(
      ClaimRule.selectClaimable(rows, base, lockedElsewhere).map((row) => row.seq),
      [4]
    )
    assert.deepStrictEqual(
      ClaimRule.selectClaimable(rows, { ...base, failedHead: "skip" }, lockedElsewhere).map((row) => row.seq),
      [2, 4]
    )
  })

  it("claimed: leased to the claim's owner until now + leaseMillis, attempts untouched", () => {
    const { rows } = table([{ key: "a", status: "PENDING", availableAt: 0, locked: false }])
    const request = { ...claimRequest({ limit: 1, maxPerKey: 1, now: 7, failedHead: undefined }), leaseMillis: 100 }
    assert.deepStrictEqual(ClaimRule.claimed(rows[0]!, request), {
      ...rows[0]!,
      status: "DISPATCHING",
      leaseOwner: "relay#1",
      leaseExpiresAt: 107,
      updatedAt: 7
    })
  })
})
