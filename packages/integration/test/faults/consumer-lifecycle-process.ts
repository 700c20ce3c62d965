/**
 * A service as its own process, for the "killed between DB commit and offset commit, lifecycle
 * on" fault test: `OutboxRuntime` on PostgreSQL + Kafka with library defaults (the consumer
 * drives the outbox lifecycle, the reconciler runs), declaring one consumer whose handler writes
 * one effect row.
 *
 * With FAULTS_KILL_AT_SUCCESS=<n> the process SIGKILLs itself at the n-th `UNDER_PROCESSING →
 * SUCCESS` write, before it reaches the database: the record's transaction (effect + inbox
 * record) has committed, its row is `UNDER_PROCESSING`, its offset is not committed.
 * Prints "ready", then "success <event-id>" per row this process moved to `SUCCESS`.
 *
 *   FAULTS_SCHEMA=… FAULTS_TOPIC=… FAULTS_GROUP=… [FAULTS_KILL_AT_SUCCESS=n] node consumer-lifecycle-process.ts
 */
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Support from "./support.ts"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}
const schema = env("FAULTS_SCHEMA")
const topic = env("FAULTS_TOPIC")
const groupId = env("FAULTS_GROUP")
const killAt = Number(process.env.FAULTS_KILL_AT_SUCCESS ?? 0)

let successWrites = 0
const killingStore = Layer.effect(OutboxStore)(
  Effect.map(OutboxStore, (store) =>
    OutboxStore.of({
      ...store,
      transition: (requests) => {
        if (killAt > 0 && requests.some((r) => r.to === "SUCCESS") && ++successWrites >= killAt) {
          return Effect.sync(() => process.kill(process.pid, "SIGKILL")).pipe(Effect.andThen(Effect.never))
        }
        return Effect.tap(store.transition(requests), (outcomes) =>
          Effect.sync(() =>
            outcomes.forEach((o, i) => {
              if (o.outcome === "applied" && requests[i]!.to === "SUCCESS") process.stdout.write(`success ${o.id}\n`)
            })
          )
        )
      }
    })
  )
)

const service = OutboxRuntime.layer({
  consumers: [
    OutboxRuntime.consumer({
      groupId,
      topics: [topic],
      fromBeginning: true,
      schema: Support.EventPayload,
      handler: (m) => Support.insertEffect(schema, m.idempotencyKey)
    })
  ]
}).pipe(Layer.provide(killingStore), Layer.provideMerge(Support.stackLayer({ schema })))

const runtime = ManagedRuntime.make(service)
await runtime.runPromise(Effect.void)
process.stdout.write("ready\n")
process.on("SIGTERM", () => {
  void runtime.dispose().then(() => process.exit(0))
})
