// The harness picks explicit environment first, and otherwise brings the services up itself.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Layer from "effect/Layer"
import { RealServices } from "../src/index.ts"

describe("RealServices harness", () => {
  it.effect("explicit DATABASE_URL and KAFKA_BROKERS win, as given", () =>
    Effect.gen(function* () {
      const endpoints = yield* RealServices.RealServices
      assert.strictEqual(endpoints.source, "env")
      assert.strictEqual(endpoints.databaseUrl, "postgres://example@db:5432/x")
      assert.deepStrictEqual(endpoints.kafkaBrokers, ["k1:9092", "k2:9092"])
    }).pipe(
      Effect.provide(
        RealServices.layer.pipe(
          Layer.provide(
            ConfigProvider.layer(
              ConfigProvider.fromUnknown({
                DATABASE_URL: "postgres://example@db:5432/x",
                KAFKA_BROKERS: "k1:9092, k2:9092"
              })
            )
          )
        )
      )
    )
  )

  it.effect(
    "without environment it runs scripts/services and reports live endpoints",
    () =>
      Effect.gen(function* () {
        const endpoints = yield* RealServices.RealServices
        assert.strictEqual(endpoints.source, "local-script")
        assert.match(endpoints.databaseUrl, /^postgres:\/\//)
        assert.match(endpoints.kafkaBrokers[0]!, /^127\.0\.0\.1:\d+$/)
      }).pipe(
        Effect.provide(RealServices.layer.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({})))))
      ),
    { timeout: 300_000 }
  )
})
