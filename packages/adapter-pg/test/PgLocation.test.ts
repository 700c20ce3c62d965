// The storage location the runtime's start line names: schema, database and host, never the
// credentials of the connection string.

import { assert, describe, it } from "@effect/vitest"
import * as Redacted from "effect/Redacted"
import { describe as location } from "../src/internal/location.ts"

describe("the outbox's location in the start line", () => {
  it("names schema, database, host and port from a URL, and not the user or password", () => {
    const text = location("outbox", {
      url: Redacted.make("postgres://app:s3cret@db.internal:6432/orders?sslmode=require")
    })
    assert.strictEqual(text, 'schema "outbox" in database orders at db.internal:6432')
    assert.notInclude(text, "s3cret")
    assert.notInclude(text, "app")
  })

  it("uses the separate fields when there is no URL", () => {
    assert.strictEqual(
      location("billing", { host: "10.0.0.5", port: 5432, database: "app" }),
      'schema "billing" in database app at 10.0.0.5:5432'
    )
    assert.strictEqual(location("outbox", {}), 'schema "outbox" in database (default) at localhost')
  })
})
