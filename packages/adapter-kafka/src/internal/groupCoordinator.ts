import type * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { brokerCall } from "../KafkaRetry.ts"

/**
 * Waits (within `KafkaRetry`'s bound) until the group's coordinator answers an offset lookup.
 * A fresh broker creates its offsets topic on the first group request and loads it a moment
 * later; a consumer that joins before then crashes (NOT_COORDINATOR_FOR_GROUP,
 * COORDINATOR_LOAD_IN_PROGRESS) and restarts. No topics are named, so the admin's metadata
 * targets stay as they were.
 */
export const awaitGroupCoordinator = (admin: Kafkajs.Admin, groupId: string): Effect.Effect<void, unknown> =>
  brokerCall("groupCoordinator", async () => {
    await admin.fetchOffsets({ groupId })
  })
