/**
 * One service as its own process, for the cross-process lifecycle test: `OutboxRuntime` on
 * PostgreSQL + Kafka with the library defaults, declaring one consumer group (lifecycle on).
 * Prints "ready" once started, then runs until SIGTERM. A refused start prints
 * "refused <json>" (the error's fields) and "printed <json string>" (what `util.inspect` shows
 * of it, as `console.error` would) and exits with 2.
 *
 *   LG_SCHEMA=… LG_TOPIC=… LG_GROUP=… DATABASE_URL=… KAFKA_BROKERS=… node lifecycle-group-process.ts
 */
import { inspect } from "node:util"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}

const service = OutboxRuntime.layer({
  relay: false,
  consumers: [
    OutboxRuntime.consumer({
      groupId: env("LG_GROUP"),
      topics: [env("LG_TOPIC")],
      schema: Schema.Struct({ orderId: Schema.String }),
      handler: () => Effect.void
    })
  ]
}).pipe(
  Layer.provideMerge(
    Layer.merge(
      PgOutbox.layer({ schema: env("LG_SCHEMA") }).pipe(
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(env("DATABASE_URL")), maxConnections: 2 }))
      ),
      KafkaOutbox.layer({ brokers: env("KAFKA_BROKERS").split(","), clientId: "lifecycle-group-process" })
    )
  )
)

// Listening before "ready" is printed: the test sends SIGTERM as soon as it reads it.
const terminated = new Promise<void>((resolve) => process.once("SIGTERM", () => resolve()))
const exit = await Effect.runPromiseExit(
  Effect.gen(function* () {
    yield* Layer.build(service)
    process.stdout.write("ready\n")
    yield* Effect.promise(() => terminated)
  }).pipe(Effect.scoped, Effect.provideService(References.MinimumLogLevel, "Warn"))
)
if (Exit.isFailure(exit)) {
  const error = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
  process.stdout.write(`refused ${JSON.stringify(error ?? Cause.pretty(exit.cause))}\n`)
  process.stdout.write(`printed ${JSON.stringify(inspect(error))}\n`)
  process.exit(2)
}
process.exit(0)
