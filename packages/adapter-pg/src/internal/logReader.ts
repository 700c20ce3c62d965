/**
 * The log source's read-ahead: a temporary copy of the slot (`<slot>_ahead`) that the lease
 * holder consumes with `pg_logical_slot_get_binary_changes`, so the relay can read the window
 * after one that is not confirmed yet — the slot itself only moves on confirm, and
 * `pg_logical_slot_peek_binary_changes` always starts at its confirmed position.
 *
 * The copy is temporary: PostgreSQL drops it when the holder's session ends (a killed relay
 * leaves nothing), and the lease drops it when it ends. It retains no more WAL than the slot.
 */
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"

export type Exec = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>

/** `X/Y` (hex) as a number that orders like the position. */
export const lsnValue = (lsn: string): bigint => {
  const [hi = "0", lo = "0"] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`)
}

// FNV-1a, so two long slot names with a common prefix still get distinct readers.
const hash = (text: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return (h >>> 0).toString(16).padStart(8, "0")
}

/** The reader slot's name: at most 63 characters of the slot alphabet. */
export const readerName = (slot: string): string =>
  slot.length <= 57 ? `${slot}_ahead` : `${slot.slice(0, 48)}_ahead_${hash(slot)}`

/** One pgoutput row of `pg_logical_slot_{peek,get}_binary_changes`. */
export interface Row {
  readonly lsn: string
  readonly data: Uint8Array
}

export interface Reader {
  /**
   * The raw pgoutput rows after position `after`, whole transactions up to `maxEntries` rows
   * (consumed from the reader, not from the slot).
   */
  readonly rowsAfter: (
    after: string,
    maxEntries: number,
    publication: string
  ) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  readonly drop: Effect.Effect<void, SqlError>
}

export const make = (exec: Exec, slot: string): Reader => {
  const name = readerName(slot)
  // Where the reader has consumed to, as far as we know: nothing of ours lies between this and
  // its real position (a read that returned no rows may consume past transactions without
  // events). `undefined`: no reader yet.
  let at: bigint | undefined
  const drop = Effect.suspend(() => {
    at = undefined
    return exec(
      `SELECT count(pg_drop_replication_slot(slot_name))::int AS n FROM pg_replication_slots WHERE slot_name = $1`,
      [name]
    )
  }).pipe(Effect.asVoid)
  // A fresh copy starts at the slot's confirmed position.
  const reset = Effect.gen(function* () {
    yield* drop
    yield* exec(`SELECT (pg_copy_logical_replication_slot($1, $2, true)).lsn::text AS lsn`, [slot, name])
    const [row] = yield* exec(
      `SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1`,
      [name]
    )
    at = lsnValue(String(row?.lsn ?? "0/0"))
  })
  const rowsAfter = (after: string, maxEntries: number, publication: string) =>
    Effect.gen(function* () {
      const target = lsnValue(after)
      // Behind: the reader went past `after` (the relay re-read from the slot after a failure).
      if (at === undefined || at > target) yield* reset
      if (at! < target) {
        yield* exec(`SELECT (pg_replication_slot_advance($1, $2::pg_lsn)).end_lsn::text AS lsn`, [name, after])
        at = target
      }
      const rows = yield* exec(
        `SELECT lsn::text AS lsn, data FROM pg_logical_slot_get_binary_changes($1::name, NULL, $2::int4,
           'proto_version', '1', 'publication_names', $3::text, 'binary', 'true')`,
        [name, maxEntries, publication]
      )
      if (rows.length > 0) at = lsnValue(String(rows[rows.length - 1].lsn))
      return rows as ReadonlyArray<Row>
    })
  return { rowsAfter, drop }
}
