/**
 * The outbox's end-to-end invariants as a pure checker over what a run left behind: the
 * enqueue transactions (with logical begin/end times), the final rows, the store's status
 * history and the broker log. Simulations call {@link check} after every run; a non-empty result
 * is a bug (or a deliberately wrong relay).
 *
 * - `loss`: every committed event ends `PUBLISHED` or later, or `FAILURE`, or `PENDING` behind a
 *   `FAILURE` row of its key (the relay's default `failedHead: "block"`); a `PUBLISHED` row has
 *   a receipt pointing at a broker record carrying its event id (rows a consumer moved on before
 *   the receipt was recorded must at least be on the broker).
 * - `phantom`: nothing from a rolled-back transaction is stored or on the broker.
 * - `order`: for two events of one key where the order rule applies, the first appearance of
 *   the earlier one in the broker log comes first; a later one never appears while the earlier
 *   one is neither on the broker nor `FAILURE`.
 * - `prefix`: in the store, an event never becomes `PUBLISHED` while an earlier event of its key
 *   (that it must follow) is still `PENDING` / `DISPATCHING` (consumer moves are not judged: a
 *   consumer may run ahead of the store).
 * - `transition`: every status change in the history is allowed by the lifecycle table (plus the
 *   operator's requeue out of `FAILURE` when `allowRequeue`), and starts from the status the row had.
 * - `failure_reason`: every `FAILURE` row has a reason.
 *
 * The order rule: within one transaction, enqueue order; across transactions of one key, a
 * transaction that ended (committed) before another began is published first. Events of one key
 * on different partitions cannot be compared by log position and are skipped by `order`.
 *
 * @since 0.1.0
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import { EVENT_ID_HEADER, type EventId, type OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { StatusChange } from "./internal/memoryStore.ts"

/**
 * One enqueue transaction as the test driver saw it. `begin` / `end` are logical times from one
 * counter shared by all drivers: `begin` read before the transaction starts, `end` after it
 * returned (so `end` is at or after the real commit: the checker only ever under-constrains).
 *
 * @since 0.1.0
 * @category models
 */
export interface EnqueueTransaction {
  readonly ids: ReadonlyArray<EventId>
  readonly keys: ReadonlyArray<string | null>
  readonly begin: number
  readonly end: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Observation {
  readonly transactions: ReadonlyArray<EnqueueTransaction>
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly history: ReadonlyArray<StatusChange>
  /** Every broker record of the topics involved (any order between partitions). */
  readonly log: ReadonlyArray<ConsumerRecord>
  /** Whether the operator's `FAILURE → PENDING` requeue may appear in the history. */
  readonly allowRequeue?: boolean
  /** The relays' `failedHead` setting (default `"block"`: a `PENDING` row may wait behind a `FAILURE` row of its key). */
  readonly failedHead?: "block" | "skip"
}

/**
 * @since 0.1.0
 * @category models
 */
export type Invariant = "loss" | "phantom" | "order" | "prefix" | "transition" | "failure_reason"

/**
 * @since 0.1.0
 * @category models
 */
export interface Violation {
  readonly invariant: Invariant
  readonly message: string
}

const ADVANCED: ReadonlySet<Lifecycle.OutboxStatus> = new Set([
  "PUBLISHED",
  "UNDER_PROCESSING",
  "SUCCESS",
  "PUSHED_FAILURE"
])

/** One event of an enqueue transaction: its key, its transaction and its place in it. */
interface Event {
  readonly id: EventId
  readonly key: string | null
  readonly tx: number
  readonly index: number
}

/** Where an event first appears in the broker log. */
interface Position {
  readonly topic: string
  readonly partition: number
  readonly offset: number
}

/** What the invariants are checked against, derived once from the observation. */
interface Facts {
  readonly observation: Observation
  /** Events whose insert is in the history (their transaction committed). */
  readonly inserted: ReadonlySet<EventId>
  readonly rowsById: ReadonlyMap<EventId, OutboxMessage>
  readonly firstAt: ReadonlyMap<EventId, Position>
  /** Broker records by `topic/partition/offset`. */
  readonly byPosition: ReadonlyMap<string, ConsumerRecord>
  readonly events: ReadonlyArray<Event>
  readonly committed: ReadonlyArray<Event>
  /** The committed events of each non-null key, in enqueue order. */
  readonly byKey: ReadonlyMap<string, ReadonlyArray<Event>>
  /** The order rule: `a` must precede `b` (same key, see the module's description). */
  readonly mustPrecede: (a: Event, b: Event) => boolean
}

type Fail = (invariant: Invariant, message: string) => void

const brokerPositions = (log: ReadonlyArray<ConsumerRecord>) => {
  const firstAt = new Map<EventId, Position>()
  const byPosition = new Map<string, ConsumerRecord>()
  for (const record of log) {
    byPosition.set(`${record.topic}/${record.partition}/${record.offset}`, record)
    const id = record.headers[EVENT_ID_HEADER] as EventId | undefined
    if (id === undefined) continue
    const offset = Number(record.offset)
    const seen = firstAt.get(id)
    if (seen === undefined) firstAt.set(id, { topic: record.topic, partition: record.partition, offset })
    else if (seen.topic === record.topic && seen.partition === record.partition && offset < seen.offset) {
      firstAt.set(id, { topic: record.topic, partition: record.partition, offset })
    }
  }
  return { firstAt, byPosition }
}

const factsOf = (observation: Observation): Facts => {
  const inserted = new Set<EventId>()
  for (const change of observation.history) if (change.from === null) inserted.add(change.id)
  const events: Array<Event> = []
  observation.transactions.forEach((tx, t) => {
    tx.ids.forEach((id, index) => {
      events.push({ id, key: tx.keys[index] ?? null, tx: t, index })
    })
  })
  const mustPrecede = (a: Event, b: Event): boolean => {
    if (a.key === null || a.key !== b.key || a.id === b.id) return false
    if (a.tx === b.tx) return a.index < b.index
    return observation.transactions[a.tx]!.end < observation.transactions[b.tx]!.begin
  }
  const committed = events.filter((event) => inserted.has(event.id))
  const byKey = new Map<string, Array<Event>>()
  for (const event of committed) {
    if (event.key === null) continue
    const list = byKey.get(event.key) ?? []
    list.push(event)
    byKey.set(event.key, list)
  }
  const rowsById = new Map(observation.rows.map((row) => [row.id, row] as const))
  return { observation, inserted, rowsById, ...brokerPositions(observation.log), events, committed, byKey, mustPrecede }
}

/** `phantom`: nothing of a rolled-back transaction is stored or on the broker. */
const checkPhantom = ({ events, inserted, rowsById, firstAt }: Facts, fail: Fail) => {
  for (const event of events) {
    if (inserted.has(event.id)) continue
    if (rowsById.has(event.id)) fail("phantom", `event ${event.id} of a rolled-back transaction is stored`)
    if (firstAt.has(event.id)) fail("phantom", `event ${event.id} of a rolled-back transaction reached the broker`)
  }
}

/** `loss`: every committed event ended published (with a receipt to its record), FAILURE, or behind a FAILURE. */
const checkLoss = ({ observation, committed, rowsById, firstAt, byPosition }: Facts, fail: Fail) => {
  for (const event of committed) {
    const row = rowsById.get(event.id)
    if (row === undefined) {
      fail("loss", `committed event ${event.id} (key ${event.key}) has no row`)
      continue
    }
    if (row.status === "FAILURE") continue
    const behindFailure =
      row.status === "PENDING" &&
      row.key !== null &&
      (observation.failedHead ?? "block") === "block" &&
      observation.rows.some((other) => other.key === row.key && other.seq < row.seq && other.status === "FAILURE")
    if (behindFailure) continue
    if (!ADVANCED.has(row.status)) {
      fail(
        "loss",
        `committed event ${row.id} (key ${row.key}) ended ${row.status} (attempts ${row.attempts}, last error ${row.lastError})`
      )
      continue
    }
    if (row.receipt === null) {
      // A consumer that ran ahead of the relay's acknowledgement may have moved the row on
      // before any receipt was recorded; the record must still be on the broker.
      if (row.status === "PUBLISHED" || !firstAt.has(row.id)) {
        fail(
          "loss",
          `event ${row.id} is ${row.status} without a receipt${firstAt.has(row.id) ? "" : " and not on the broker"}`
        )
      }
      continue
    }
    const record = byPosition.get(`${row.receipt.topic}/${row.receipt.partition}/${row.receipt.offset}`)
    if (record === undefined || record.headers[EVENT_ID_HEADER] !== row.id) {
      fail("loss", `event ${row.id} is ${row.status} but its receipt ${JSON.stringify(row.receipt)} is not its record`)
    }
  }
}

/** `failure_reason`: every FAILURE row (committed events first, then the other rows) has a reason. */
const checkFailureReason = ({ observation, committed, rowsById }: Facts, fail: Fail) => {
  const noReason = (row: OutboxMessage) => row.lastError === null || row.lastError.trim() === ""
  for (const event of committed) {
    const row = rowsById.get(event.id)
    if (row?.status === "FAILURE" && noReason(row))
      fail("failure_reason", `event ${row.id} is FAILURE without a reason`)
  }
  for (const row of observation.rows) {
    if (row.status === "FAILURE" && !committed.some((event) => event.id === row.id) && noReason(row)) {
      fail("failure_reason", `event ${row.id} is FAILURE without a reason`)
    }
  }
}

/** `order`: of two events one must precede, the earlier one appears first on the broker. */
const checkOrder = ({ byKey, mustPrecede, firstAt, rowsById }: Facts, fail: Fail) => {
  for (const [key, list] of byKey) {
    for (const a of list) {
      for (const b of list) {
        if (!mustPrecede(a, b)) continue
        const atA = firstAt.get(a.id)
        const atB = firstAt.get(b.id)
        if (atB === undefined) continue
        if (atA === undefined) {
          if (rowsById.get(a.id)?.status !== "FAILURE") {
            fail(
              "order",
              `key ${key}: ${b.id} reached the broker but the earlier ${a.id} never did (and is not FAILURE)`
            )
          }
          continue
        }
        if (atA.topic !== atB.topic || atA.partition !== atB.partition) continue
        if (atA.offset > atB.offset) {
          fail(
            "order",
            `key ${key}: ${b.id} first appeared at offset ${atB.offset}, before the earlier ${a.id} at ${atA.offset}`
          )
        }
      }
    }
  }
}

/**
 * Replays the history in commit order, calling `visit` with each change and the status its row
 * had before it (undefined: absent).
 */
const replay = (
  history: ReadonlyArray<StatusChange>,
  visit: (
    change: StatusChange,
    current: Lifecycle.OutboxStatus | undefined,
    status: ReadonlyMap<EventId, Lifecycle.OutboxStatus>
  ) => void
) => {
  const status = new Map<EventId, Lifecycle.OutboxStatus>()
  for (const change of history) {
    visit(change, status.get(change.id), status)
    status.set(change.id, change.to)
  }
}

/** `transition`: every change is allowed by the lifecycle table and starts where the row was. */
const checkTransition = ({ observation }: Facts, fail: Fail) =>
  replay(observation.history, (change, current) => {
    if (change.from === null) {
      if (current !== undefined) fail("transition", `event ${change.id} inserted twice`)
      if (change.to !== "PENDING" && change.to !== "PREQUEUED")
        fail("transition", `event ${change.id} inserted as ${change.to}`)
      return
    }
    if (current !== change.from) {
      fail("transition", `event ${change.id} moved ${change.from} -> ${change.to} but was ${current ?? "absent"}`)
    }
    const legal =
      Lifecycle.canTransition(change.from, change.to) ||
      (observation.allowRequeue === true && Lifecycle.canRequeue(change.from) && change.to === "PENDING")
    if (!legal) fail("transition", `event ${change.id} made the forbidden move ${change.from} -> ${change.to}`)
  })

/**
 * `prefix`: no event becomes PUBLISHED while an earlier one of its key is still waiting. A
 * publication fact only: a consumer may legitimately run ahead of the store (it saw the record on
 * the broker while the row still said PENDING after a lost ack).
 */
const checkPrefix = ({ observation, committed, byKey, mustPrecede }: Facts, fail: Fail) => {
  const eventById = new Map(committed.map((event) => [event.id, event] as const))
  replay(observation.history, (change, _current, status) => {
    if (change.from === null || change.to !== "PUBLISHED") return
    const event = eventById.get(change.id)
    const earlier =
      event === undefined || event.key === null ? [] : byKey.get(event.key)!.filter((a) => mustPrecede(a, event))
    for (const a of earlier) {
      const aStatus = status.get(a.id)
      if (aStatus !== undefined && !ADVANCED.has(aStatus) && aStatus !== "FAILURE") {
        fail("prefix", `key ${event!.key}: ${change.id} became ${change.to} while the earlier ${a.id} was ${aStatus}`)
      }
    }
  })
}

/**
 * Checks every invariant; returns the violations found (empty when the run was correct), grouped
 * by invariant.
 *
 * @since 0.1.0
 * @category checking
 */
export const check = (observation: Observation): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const fail: Fail = (invariant, message) => {
    violations.push({ invariant, message })
  }
  const facts = factsOf(observation)
  for (const invariant of [checkPhantom, checkLoss, checkFailureReason, checkOrder, checkTransition, checkPrefix]) {
    invariant(facts, fail)
  }
  return violations
}

/**
 * A readable report of violations, at most `limit` lines.
 *
 * @since 0.1.0
 * @category checking
 */
export const format = (violations: ReadonlyArray<Violation>, limit = 20): string =>
  violations
    .slice(0, limit)
    .map((v) => `[${v.invariant}] ${v.message}`)
    .join("\n") + (violations.length > limit ? `\n… and ${violations.length - limit} more` : "")
