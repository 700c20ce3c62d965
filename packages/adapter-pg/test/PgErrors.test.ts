// How a database failure is classified: infrastructure states (a restart, a failover, a full
// connection table, a demoted primary answering read-only, a timeout) are retriable even when the
// driver files them as unknown.
import { assert, describe, it } from "@effect/vitest"
import { SqlError, SqlSyntaxError, UnknownError } from "effect/sql/SqlError"
import { fromSqlError } from "../src/internal/errors.ts"

const withState = (code: string) =>
  new SqlError({ reason: new UnknownError({ cause: { code, message: `pg says ${code}` }, message: "Query failed" }) })

describe("fromSqlError", () => {
  for (const code of [
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
  ]) {
    it(`SQLSTATE ${code} is retriable (the database, not the request)`, () => {
      const error = fromSqlError("lookup")(withState(code))
      assert.isTrue(error.retriable)
      assert.include(error.reason, `SQLSTATE ${code}`)
    })
  }

  it("a request error (syntax, unknown state) stays permanent", () => {
    assert.isFalse(fromSqlError("lookup")(withState("22P02")).retriable)
    const syntax = new SqlError({ reason: new SqlSyntaxError({ cause: { code: "42601" }, message: "syntax" }) })
    assert.isFalse(fromSqlError("lookup")(syntax).retriable)
  })
})
