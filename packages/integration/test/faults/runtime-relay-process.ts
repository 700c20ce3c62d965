/**
 * A service as its own process, for the freeze fault test: `OutboxRuntime` with one claim relay
 * and its health server on PostgreSQL + Kafka, running until killed. Prints "ready <health port>"
 * once the runtime started.
 *
 *   FAULTS_SCHEMA=<schema> KAFKA_BROKERS=<brokers> node runtime-relay-process.ts
 */
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Support from "./support.ts"

const schema = process.env.FAULTS_SCHEMA
if (schema === undefined) throw new Error("FAULTS_SCHEMA is required")

const service = OutboxRuntime.layer({
  relay: { instances: 1, owner: `frozen-${schema}`, pollInterval: Duration.millis(200) },
  health: { port: 0, host: "127.0.0.1", timeout: Duration.seconds(2) }
}).pipe(Layer.provideMerge(Support.stackLayer({ schema, applicationName: "faults-runtime-relay" })))

const runtime = ManagedRuntime.make(service)
const info = await runtime.runPromise(Effect.service(OutboxRuntime.OutboxRuntime))
process.stdout.write(`ready ${info.healthPort}\n`)
await runtime.runPromise(Effect.never)
