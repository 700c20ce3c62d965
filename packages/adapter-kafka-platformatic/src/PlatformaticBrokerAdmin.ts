/**
 * `BrokerAdmin` on @platformatic/kafka: the Kafka layer's `Admin` (topics, partitions and
 * consumer-group offsets) over the @platformatic/kafka driver.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Admin from "@effect-outbox/kafka/Admin"
import type { Admin as PlatformaticAdmin } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Driver from "./internal/driver.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type PlatformaticBrokerAdminOptions = Admin.AdminOptions

/**
 * Deletes the topics that exist among `topics`; failures are ignored (test and tool cleanup).
 *
 * @since 0.1.0
 * @category operations
 */
export const deleteTopics = (admin: PlatformaticAdmin, topics: ReadonlyArray<string>): Effect.Effect<void> =>
  Admin.deleteExisting(
    { listTopics: () => admin.listTopics(), deleteTopics: (doomed) => admin.deleteTopics({ topics: doomed }) },
    topics
  ).pipe(Effect.tapDefect((defect) => Effect.logDebug(`deleteTopics: ${describe(defect)}`)))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticBrokerAdminOptions = {}
): Effect.Effect<BrokerAdmin["Service"], never, PlatformaticClient> =>
  PlatformaticClient.useSync((client) => Admin.make(Driver.make(client), options))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticBrokerAdminOptions = {}
): Layer.Layer<BrokerAdmin, never, PlatformaticClient> => Layer.effect(BrokerAdmin)(make(options))
