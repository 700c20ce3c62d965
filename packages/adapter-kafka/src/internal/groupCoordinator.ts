import * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { brokerCall } from "../KafkaRetry.ts"

/**
 * Connects `consumer` once its group's coordinator answers an offset lookup, both retried within
 * `KafkaRetry`'s bound. A fresh broker creates its offsets topic on the first group request and
 * loads it a moment later; a consumer that joins before then crashes (NOT_COORDINATOR_FOR_GROUP,
 * GROUP_LOAD_IN_PROGRESS) and restarts. The lookup names no topics, so the admin's metadata
 * targets stay as they were. A failed connect disconnects, so the next attempt starts clean.
 */
export const connectWhenCoordinatorReady = (
  admin: Kafkajs.Admin,
  consumer: Kafkajs.Consumer,
  groupId: string
): Effect.Effect<void, unknown> =>
  brokerCall("groupCoordinator", () => admin.fetchOffsets({ groupId })).pipe(
    Effect.andThen(
      brokerCall("consumer.connect", async () => {
        try {
          await consumer.connect()
        } catch (error) {
          await consumer.disconnect().catch(() => undefined)
          throw error
        }
      })
    ),
    Effect.asVoid
  )
