import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as Result from "effect/Result"

/** A typed array parameter (`uuid[]`, `text[]`, …): one bind for a whole batch. */
export const typedArray = (values: ReadonlyArray<unknown>, oid: number): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, oid))

/** Epoch millis as a `timestamptz` parameter. */
export const ts = (ms: number): PgTypes.Parameter => PgTypes.timestamptz(ms)
