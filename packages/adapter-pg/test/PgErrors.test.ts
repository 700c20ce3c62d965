// How a database failure is classified: infrastructure states (a restart, a failover, a full
// connection table, a demoted primary answering read-only, a timeout) are `unavailable` even when
// the driver files them as unknown; a request's own error is `permanent`.
import { assert, describe, it } from "@effect/vitest"
import { StoreError } from "@effect-outbox/core/Errors"
import {
  ConnectionError,
  DeadlockError,
  SqlError,
  SqlSyntaxError,
  UniqueViolation,
  UnknownError
} from "effect/sql/SqlError"
import * as PgErrors from "../src/PgErrors.ts"

const withState = (code: string) =>
  new SqlError({ reason: new UnknownError({ cause: { code, message: `pg says ${code}` }, message: "Query failed" }) })

const infrastructureStates = [
  "57P03",
  "57P01",
  "57P02",
  "08006",
  "08001",
  "53300",
  "40001",
  "40P01",
  "40003",
  "25006",
  "25P03",
  "57014",
  "55P03"
]

describe("PgErrors.fromSqlError", () => {
  for (const code of infrastructureStates) {
    it(`SQLSTATE ${code} is unavailable (the database, not the request)`, () => {
      const error = PgErrors.fromSqlError("lookup")(withState(code))
      assert.instanceOf(error, StoreError)
      assert.strictEqual(error.kind, "unavailable")
      assert.isTrue(error.retriable)
      assert.include(error.reason, `SQLSTATE ${code}`)
    })
  }

  it("a lost connection and what the driver marks retryable are unavailable", () => {
    const lost = new SqlError({ reason: new ConnectionError({ cause: new Error("ECONNRESET") }) })
    assert.strictEqual(PgErrors.fromSqlError("lookup")(lost).kind, "unavailable")
    const deadlock = new SqlError({ reason: new DeadlockError({ cause: { code: "40P01" } }) })
    assert.strictEqual(PgErrors.fromSqlError("lookup")(deadlock).kind, "unavailable")
  })

  it("a request error (syntax, unique violation, unknown state) is permanent", () => {
    assert.strictEqual(PgErrors.fromSqlError("lookup")(withState("22P02")).kind, "permanent")
    const syntax = new SqlError({ reason: new SqlSyntaxError({ cause: { code: "42601" }, message: "syntax" }) })
    assert.strictEqual(PgErrors.fromSqlError("lookup")(syntax).kind, "permanent")
    const unique = new SqlError({
      reason: new UniqueViolation({ cause: { code: "23505" }, message: "dup", constraint: "pk" })
    })
    assert.strictEqual(PgErrors.fromSqlError("lookup")(unique).kind, "permanent")
    assert.isFalse(PgErrors.fromSqlError("lookup")(unique).retriable)
  })
})

describe("PgErrors.isInfrastructure (a consumer's test for handlers running their own SQL)", () => {
  it("a handler's SqlError with an infrastructure SQLSTATE waits with the partition; a request error does not", () => {
    for (const code of infrastructureStates) assert.isTrue(PgErrors.isInfrastructure(withState(code)), code)
    assert.isFalse(PgErrors.isInfrastructure(withState("23505")))
  })

  it("any other error is left to the consumer's default, which reads its kind", () => {
    assert.isTrue(PgErrors.isInfrastructure(new StoreError({ operation: "q", reason: "gone", kind: "unavailable" })))
    assert.isFalse(PgErrors.isInfrastructure(new StoreError({ operation: "q", reason: "bad", kind: "permanent" })))
    assert.isFalse(PgErrors.isInfrastructure(new Error("handler bug")))
  })

  it("every infrastructure SQLSTATE is one of the list's, and a neighbour is not", () => {
    for (const code of infrastructureStates) assert.isTrue(PgErrors.isInfrastructureState(code), code)
    for (const code of ["25001", "57000", "40002", "42P01", "23505"])
      assert.isFalse(PgErrors.isInfrastructureState(code))
    assert.isFalse(PgErrors.isInfrastructureState(undefined))
  })
})
