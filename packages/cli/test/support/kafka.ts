/**
 * What the CLI's integration tests do on the shared broker beside the command under test:
 * delete their topics at the end, and build the dead letters a consumer would have written.
 */
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"

export const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092"

/** Deletes `topics` on the shared broker. */
export const deleteTopics = async (topics: ReadonlyArray<string>) => {
  const { default: Kafkajs } = await import("kafkajs")
  const admin = new Kafkajs.Kafka({ brokers: brokers.split(","), logLevel: Kafkajs.logLevel.NOTHING }).admin()
  await admin.connect()
  try {
    await admin.deleteTopics({ topics: [...topics] })
  } finally {
    await admin.disconnect()
  }
}

/**
 * The dead letters of `topic`'s records at offsets 0, 1, … (one per id, key `k<i>`, payload
 * `{ broken: i }`), as consumer group `billing` writes them to `dlt` after `attempts` tries.
 */
export const poisonLetters = (
  topic: string,
  dlt: string,
  ids: ReadonlyArray<string>,
  options: { readonly attempts?: number; readonly error?: (i: number) => Error } = {}
) =>
  Effect.forEach(ids, (id, i) =>
    DeadLetter.toPublishRequest(
      {
        topic,
        partition: 0,
        offset: String(i),
        key: `k${i}`,
        headers: { "event-id": id },
        value: jsonPayload({ broken: i }),
        timestamp: Date.now()
      },
      dlt,
      {
        error: options.error?.(i) ?? new Error(`poison ${i}`),
        attempts: options.attempts ?? 1,
        classification: "permanent",
        consumerGroup: "billing"
      }
    )
  )
