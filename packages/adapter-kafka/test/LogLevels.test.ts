// kafkajs's log lines in Effect's logger: what is noise (Debug) and what an operator sees once.

import { assert, describe, it } from "@effect/vitest"
import Kafkajs from "kafkajs"
import { effectLevel, onceAMinute } from "../src/internal/logLevels.ts"

describe("kafkajs log levels", () => {
  it("failed connection attempts and handled broker errors are Debug; other errors Warn", () => {
    const { ERROR, INFO, WARN } = Kafkajs.logLevel
    const refused = "Failed to connect to seed broker, trying another broker from the list: Connection error"
    assert.strictEqual(effectLevel(ERROR, "BrokerPool", refused), "Debug")
    assert.strictEqual(effectLevel(ERROR, "Connection", "Response Metadata(key: 3, version: 6)"), "Debug")
    assert.strictEqual(effectLevel(ERROR, "Consumer", "Crash: KafkaJSNumberOfRetriesExceeded"), "Warn")
    assert.strictEqual(effectLevel(WARN, "Producer", "Limiting retries for the idempotent producer"), "Debug")
    assert.strictEqual(effectLevel(WARN, "Consumer", "something new"), "Warn")
    assert.strictEqual(effectLevel(INFO, "Consumer", "Starting"), "Debug")
  })

  it("a repeated warning is logged once a minute per namespace and text, the repeats at Debug", () => {
    let now = 0
    const once = onceAMinute(() => now)
    assert.strictEqual(once("Warn", "Consumer", "crashed"), "Warn")
    now = 30_000
    assert.strictEqual(once("Warn", "Consumer", "crashed"), "Debug")
    assert.strictEqual(once("Warn", "Admin", "crashed"), "Warn")
    assert.strictEqual(once("Debug", "Consumer", "crashed"), "Debug")
    now = 61_000
    assert.strictEqual(once("Warn", "Consumer", "crashed"), "Warn")
  })
})
