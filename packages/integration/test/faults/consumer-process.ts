/**
 * A consumer as its own process, for the "killed between DB commit and offset commit" fault
 * test: the library consumer on PostgreSQL + Kafka whose handler writes one effect row. With
 * FAULTS_KILL_ON_COMMIT=1 the process SIGKILLs itself the first time the consumer asks Kafka to
 * commit offsets — after the database transaction committed (R4.5), before the offsets are.
 * Prints "ready", then "outcome <identity> <processed|already_processed>" per processOnce.
 *
 *   FAULTS_SCHEMA=… FAULTS_TOPIC=… FAULTS_GROUP=… [FAULTS_KILL_ON_COMMIT=1] node consumer-process.ts
 */
import * as Consumer from "@effect-outbox/core/Consumer"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Effect from "effect/Effect"
import * as Support from "./support.ts"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}
const schema = env("FAULTS_SCHEMA")
const topic = env("FAULTS_TOPIC")
const groupId = env("FAULTS_GROUP")
const killOnCommit = process.env.FAULTS_KILL_ON_COMMIT === "1"

const stack = await Support.makeStack({ schema })
await stack.runPromise(
  Effect.gen(function* () {
    const source = yield* ConsumerSource
    const inbox = yield* Inbox.Inbox
    const consumer = yield* Consumer.make({
      groupId,
      topics: [topic],
      fromBeginning: true,
      // The inbox alone guards the effect (a second consumer group's view): records are not
      // skipped by their outbox row's status, so every redelivery goes through processOnce.
      lifecycle: false,
      schema: Support.EventPayload,
      handler: (m) => Support.insertEffect(schema, m.idempotencyKey)
    }).pipe(
      Effect.provideService(ConsumerSource, {
        subscribe: (options) =>
          Effect.map(source.subscribe(options), (subscription) => ({
            ...subscription,
            commit: (offsets) =>
              killOnCommit
                ? Effect.sync(() => process.kill(process.pid, "SIGKILL")).pipe(Effect.andThen(Effect.never))
                : subscription.commit(offsets)
          }))
      }),
      Effect.provideService(Inbox.Inbox, {
        processOnce: (key, work) =>
          Effect.tap(inbox.processOnce(key, work), (outcome) =>
            Effect.sync(() => process.stdout.write(`outcome ${key.identity} ${outcome}\n`))
          ),
        processBatch: (entries, options) =>
          Effect.tap(inbox.processBatch(entries, options), (results) =>
            Effect.sync(() =>
              results.forEach((exit, i) => {
                if (exit._tag === "Success") process.stdout.write(`outcome ${entries[i]!.key.identity} ${exit.value}\n`)
              })
            )
          )
      })
    )
    process.stdout.write("ready\n")
    return yield* consumer.await
  }).pipe(Effect.scoped)
)
