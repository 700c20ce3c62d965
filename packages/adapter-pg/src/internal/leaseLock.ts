/**
 * The log engine's lease lock, spelled once: `pg_advisory_lock(hashtext('effect-outbox-log'),
 * hashtext(<slot>))`. Both transports take it (the streaming one on its replication connection,
 * the SQL one on a pool connection), and a standby looks for it in `pg_locks` before connecting.
 * `slot` is an SQL expression: a bound parameter (`$1`) or, on a replication connection (simple
 * query protocol, no parameters), a quoted literal of a name already checked against [a-z0-9_].
 */
const keys = (slot: string) => `hashtext('effect-outbox-log'), hashtext(${slot})`

/** `ok`: whether this session took the lock. */
export const tryLock = (slot: string) => `SELECT pg_try_advisory_lock(${keys(slot)}) AS ok`

export const unlock = (slot: string) => `SELECT pg_advisory_unlock(${keys(slot)})`

// pg_locks shows a two-key advisory lock's int4 keys as oids (classid, objid) with objsubid 2.
const asOid = (key: string) => `(((${key})::int8 + 4294967296) % 4294967296)::oid`

/** A boolean expression: some session of this database holds the lock. */
export const heldBySomeone = (slot: string) =>
  `EXISTS (SELECT 1 FROM pg_locks
            WHERE locktype = 'advisory' AND granted AND objsubid = 2
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND classid = ${asOid("hashtext('effect-outbox-log')")} AND objid = ${asOid(`hashtext(${slot})`)})`
