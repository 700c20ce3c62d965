/**
 * A consumer with key-ordered concurrency as its own process, for the SIGKILL fault test: the
 * library consumer on PostgreSQL + Kafka, `concurrency: { by: "key", perPartition }`, whose
 * handler waits a few milliseconds (so records of different keys finish out of order) and writes
 * one effect row. Prints "ready"; the test kills it with SIGKILL.
 *
 *   FAULTS_SCHEMA=… FAULTS_TOPIC=… FAULTS_GROUP=… FAULTS_PER_PARTITION=32 node consumer-keyed-process.ts
 */
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Effect from "effect/Effect"
import * as Support from "./support.ts"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}
const schema = env("FAULTS_SCHEMA")
const perPartition = Number(env("FAULTS_PER_PARTITION"))

const stack = await Support.makeStack({ schema, maxConnections: 24 })
await stack.runPromise(
  Effect.gen(function* () {
    const consumer = yield* Consumer.make({
      groupId: env("FAULTS_GROUP"),
      topics: [env("FAULTS_TOPIC")],
      fromBeginning: true,
      // The inbox alone guards the effect: every redelivery goes through processOnce.
      lifecycle: false,
      concurrency: { by: "key", perPartition },
      schema: Support.EventPayload,
      handler: (m) =>
        Effect.sleep(`${1 + (m.payload.index % 7)} millis`).pipe(
          Effect.andThen(Support.insertEffect(schema, m.idempotencyKey, m.record))
        )
    })
    process.stdout.write("ready\n")
    return yield* consumer.await
  }).pipe(Effect.scoped)
)
