// The shared client: configuration from the environment, and kafkajs's logging inside Effect's.

import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import * as KafkaClient from "../src/KafkaClient.ts"
import { brokers } from "./support.ts"

describe("KafkaClient", () => {
  it.live("reads KAFKA_BROKERS (comma separated) and KAFKA_CLIENT_ID, with defaults", () =>
    Effect.gen(function* () {
      const given = yield* KafkaClient.config.pipe(
        Effect.provide(
          ConfigProvider.layer(
            ConfigProvider.fromUnknown({ KAFKA_BROKERS: "b-1:9092, b-2:9093", KAFKA_CLIENT_ID: "billing" })
          )
        )
      )
      assert.deepStrictEqual(given, { brokers: ["b-1:9092", "b-2:9093"], clientId: "billing" })
      const defaults = yield* KafkaClient.config.pipe(
        Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({})))
      )
      assert.deepStrictEqual(defaults, { brokers: ["127.0.0.1:9092"], clientId: "effect-outbox" })
    })
  )

  it.live("kafkajs logs reach Effect's logger: broker error responses it handles at Debug", () =>
    Effect.gen(function* () {
      const entries: Array<{ level: string; text: string }> = []
      const capture = Logger.make<unknown, void>(({ logLevel, message }) => {
        entries.push({
          level: logLevel,
          text: Array.isArray(message) ? message.map(String).join(" ") : String(message)
        })
      })
      yield* Effect.gen(function* () {
        // Asking for a topic that does not exist makes the broker answer with an error, which
        // kafkajs logs at ERROR and we map to `None`.
        const count = yield* (yield* BrokerAdmin).partitionCount(`adapter-kafka-missing-${Date.now()}`)
        assert.isTrue(Option.isNone(count))
      }).pipe(
        Effect.provide(
          KafkaBrokerAdmin.layer().pipe(
            Layer.provideMerge(KafkaClient.layer({ brokers, clientId: "adapter-kafka-logs" }))
          )
        ),
        Effect.provide(Logger.layer([capture])),
        Effect.provideService(References.MinimumLogLevel, "Trace")
      )
      const kafkajs = entries.filter((e) => e.text.startsWith("kafkajs "))
      const response = kafkajs.find((e) => e.text.startsWith("kafkajs Connection: Response Metadata"))
      assert.isDefined(response, JSON.stringify(kafkajs))
      assert.strictEqual(response!.level, "Debug")
      assert.isFalse(kafkajs.some((e) => e.level === "Error" || e.level === "Fatal"))
    })
  )
})
