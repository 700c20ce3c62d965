/**
 * A relay as its own process, for the SIGKILL fault test: the library relay and stale recovery
 * on PostgreSQL + Kafka, running until killed. Prints "ready" once its layers are built.
 *
 *   FAULTS_SCHEMA=<schema> KAFKA_BROKERS=<brokers> node relay-process.ts
 */
import * as Relay from "@effect-outbox/core/Relay"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Support from "./support.ts"

const schema = process.env.FAULTS_SCHEMA
if (schema === undefined) throw new Error("FAULTS_SCHEMA is required")
const leaseMillis = Number(process.env.FAULTS_LEASE_MILLIS ?? 3000)

const stack = await Support.makeStack({ schema, applicationName: "faults-relay-process" })
process.stdout.write("ready\n")
await stack.runPromise(
  Effect.gen(function* () {
    yield* StaleRecovery.start({ interval: Duration.millis(500), batchSize: 500 })
    yield* Relay.start({
      batchSize: 100,
      maxPerKey: 100,
      lease: Duration.millis(leaseMillis),
      publishTimeout: Duration.millis(Math.max(1000, leaseMillis - 1000)),
      pollInterval: Duration.millis(100)
    })
    return yield* Effect.never
  }).pipe(Effect.scoped)
)
