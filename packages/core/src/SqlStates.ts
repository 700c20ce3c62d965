/**
 * PostgreSQL SQLSTATEs that describe the database rather than the statement: retrying later
 * succeeds. One list, read by the consumer's default infrastructure test and by the PostgreSQL
 * adapter's error mapping, so the two cannot disagree.
 *
 * - class 08: connection exceptions; class 53: insufficient resources (53300 too many connections);
 * - 57P01 / 57P02 / 57P03: admin or crash shutdown, cannot connect now (starting up, shutting down);
 * - 40001 / 40P01 / 40003: serialization failure, deadlock, statement completion unknown;
 * - 25006: read-only transaction (a client still on a demoted primary after a fail-over, or the
 *   database set read-only for maintenance); 25P03: idle-in-transaction timeout;
 * - 57014 / 55P03: statement or lock timeout (or a cancel): the database was busy, not the record bad.
 *
 * @since 0.1.0
 */

const exact: ReadonlySet<string> = new Set([
  "57P01",
  "57P02",
  "57P03",
  "40001",
  "40P01",
  "40003",
  "25006",
  "25P03",
  "57014",
  "55P03"
])

/**
 * Whether a SQLSTATE is one of the database's own (see the module's list).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isInfrastructure = (state: string | undefined): boolean =>
  state !== undefined && (state.startsWith("08") || state.startsWith("53") || exact.has(state))
