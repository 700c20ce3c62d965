import * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { brokerCall } from "../KafkaRetry.ts"

/**
 * A kafkajs admin for one operation. Offset lookups make kafkajs remember the topic in the
 * client's metadata "target topics"; once such a topic is deleted, every later metadata refresh
 * of that client fails with UNKNOWN_TOPIC_OR_PARTITION. Doing those lookups on a short-lived
 * admin keeps the shared one clean. Connecting is retried like every broker call (`KafkaRetry`).
 */
export const withEphemeralAdmin = <A, E>(
  kafka: Kafkajs.Kafka,
  use: (admin: Kafkajs.Admin) => Effect.Effect<A, E>,
  onConnectError: (error: unknown) => E
): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(
    brokerCall("admin.connect", async () => {
      const admin = kafka.admin()
      try {
        await admin.connect()
        return admin
      } catch (error) {
        await admin.disconnect().catch(() => undefined)
        throw error
      }
    }).pipe(Effect.mapError(onConnectError)),
    use,
    (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
  )
