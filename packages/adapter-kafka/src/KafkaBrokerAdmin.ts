/**
 * `BrokerAdmin` on kafkajs: the Kafka layer's `Admin` (topic creation, partition counts and
 * growth, consumer-group offsets for lag) over the kafkajs driver.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerAdminError } from "@effect-outbox/core/Errors"
import * as Admin from "@effect-outbox/kafka/Admin"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type Kafkajs from "kafkajs"
import * as Driver from "./internal/driver.ts"
import { KafkaClient } from "./KafkaClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type KafkaBrokerAdminOptions = Admin.AdminOptions

/**
 * Every topic on the broker, asked once on a short-lived admin that does not retry.
 *
 * @since 0.1.0
 * @category operations
 */
export const listTopics = (kafka: Kafkajs.Kafka): Effect.Effect<ReadonlyArray<string>, BrokerAdminError> =>
  Driver.listTopics(kafka)

/**
 * Deletes topics (tests and tooling; not part of the port). Missing topics are ignored.
 *
 * @since 0.1.0
 * @category operations
 */
export const deleteTopics = (admin: Kafkajs.Admin, topics: ReadonlyArray<string>): Effect.Effect<void> =>
  Admin.deleteExisting(
    {
      listTopics: () => admin.listTopics(),
      deleteTopics: (doomed) => admin.deleteTopics({ topics: doomed, timeout: 10_000 })
    },
    topics
  )

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaBrokerAdminOptions = {}
): Effect.Effect<BrokerAdmin["Service"], never, KafkaClient> =>
  KafkaClient.useSync((client) => Admin.make(Driver.make(client), options))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaBrokerAdminOptions = {}): Layer.Layer<BrokerAdmin, never, KafkaClient> =>
  Layer.effect(BrokerAdmin)(make(options))
