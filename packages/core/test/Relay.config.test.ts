import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Relay from "../src/Relay.ts"
import * as Retention from "../src/Retention.ts"
import * as StaleRecovery from "../src/StaleRecovery.ts"

const withEnv = (env: Record<string, string>) =>
  Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnvRecord(env))

describe("configuration from the environment", () => {
  it.effect("relay settings default sensibly", () =>
    Effect.gen(function* () {
      const settings = yield* Relay.config.pipe(withEnv({}))
      assert.strictEqual(settings.batchSize, 100)
      assert.strictEqual(settings.maxPerKey, 100)
      assert.strictEqual(Duration.toMillis(settings.lease), 30_000)
      assert.strictEqual(settings.unknownPartition, "fail")
      assert.strictEqual(settings.failedHead, "block", "a FAILURE head blocks its key by default (#12)")
      const outage = yield* Relay.outageDelay(settings.outageBackoff, 20)
      assert.strictEqual(outage, 10_000, "the outage backoff is capped at 10 s")
      assert.isUndefined(settings.owner)
    })
  )

  it.effect("relay settings are read from OUTBOX_RELAY_*", () =>
    Effect.gen(function* () {
      const settings = yield* Relay.config.pipe(
        withEnv({
          OUTBOX_RELAY_OWNER: "relay-a",
          OUTBOX_RELAY_BATCH_SIZE: "50",
          OUTBOX_RELAY_LEASE: "10 seconds",
          OUTBOX_RELAY_POLL_INTERVAL: "250 millis",
          OUTBOX_RELAY_MAX_ATTEMPTS: "4",
          OUTBOX_RELAY_BACKOFF_BASE: "1 second",
          OUTBOX_RELAY_BACKOFF_MAX: "2 seconds",
          OUTBOX_RELAY_UNKNOWN_PARTITION: "sync",
          OUTBOX_RELAY_FAILED_HEAD: "skip",
          OUTBOX_RELAY_OUTAGE_BACKOFF_BASE: "100 millis",
          OUTBOX_RELAY_OUTAGE_BACKOFF_MAX: "300 millis"
        })
      )
      assert.strictEqual(settings.failedHead, "skip")
      assert.strictEqual(yield* Relay.outageDelay(settings.outageBackoff, 5), 300)
      assert.strictEqual(settings.owner, "relay-a")
      assert.strictEqual(settings.batchSize, 50)
      assert.strictEqual(settings.maxPerKey, 50, "per-key cap follows the batch size unless set")
      assert.strictEqual(Duration.toMillis(settings.lease), 10_000)
      assert.strictEqual(Duration.toMillis(settings.pollInterval), 250)
      assert.strictEqual(settings.maxAttempts, 4)
      assert.strictEqual(settings.unknownPartition, "sync")
      const third = Option.getOrThrow(yield* Relay.retryDelay(settings.backoff, 3))
      assert.strictEqual(third, 2_000, "capped at the backoff max")
    })
  )

  it.effect("a bad switch value is a config error, not a silent default", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Relay.config.pipe(withEnv({ OUTBOX_RELAY_UNKNOWN_PARTITION: "maybe" })))
      assert.include(String(error), "OUTBOX_RELAY_UNKNOWN_PARTITION")
    })
  )

  it.effect("stale recovery and retention read their own keys", () =>
    Effect.gen(function* () {
      const stale = yield* StaleRecovery.config.pipe(withEnv({ OUTBOX_STALE_INTERVAL: "5 seconds" }))
      assert.strictEqual(Duration.toMillis(stale.interval), 5_000)
      const retention = yield* Retention.config.pipe(withEnv({ OUTBOX_RETENTION_STATUSES: "SUCCESS, PUSHED_FAILURE" }))
      assert.deepStrictEqual([...retention.statuses], ["SUCCESS", "PUSHED_FAILURE"])
      assert.isDefined(Retention.validate({ ...retention, statuses: ["PENDING"] }))
    })
  )
})
