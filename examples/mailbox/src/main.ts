/**
 * `node examples/mailbox/src/main.ts`: the mailbox scenario on the real services
 * (`DATABASE_URL`, `KAFKA_BROKERS`; defaults: the local ones), printed as it happened. Its schema
 * and topics are left in place for `effect-outbox status --schema <schema>` to look at.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as Scenario from "./Scenario.ts"
import * as Services from "./Services.ts"

const runId = Math.random().toString(36).slice(2, 8)
const schema = `mailbox_${runId}`

const program = Effect.gen(function* () {
  const report = yield* Scenario.run({
    schema,
    topic: `mailbox.${runId}.commands`,
    groupId: `mailbox-${runId}`,
    users: 5,
    messagesPerUser: 3,
    timeout: "60 seconds"
  })
  console.log(`schema ${schema}: ${report.users.length} users on ${report.partitionCount} partitions`)
  for (const user of report.users) {
    const box = report.mailboxes.get(user.id) ?? []
    console.log(
      `  ${user.id} -> partition ${user.partition}: ${box.map((m) => `${m.messageId}(${m.state})`).join(" ")}`
    )
  }
  const counts = new Map<string, number>()
  for (const status of report.statuses.values()) counts.set(status, (counts.get(status) ?? 0) + 1)
  console.log(`outbox: ${[...counts].map(([s, n]) => `${s} ${n}`).join(", ")}`)
  console.log(`lifecycle of one command: ${report.lifecycle.join(", ")}`)
  console.log(`dead-lettered: ${report.deadLettered.join(", ")}`)
  return report.finished ? 0 : 1
}).pipe(
  Effect.provide(
    Services.layer({
      databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
      brokers: (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(","),
      schema,
      maxPerPartition: 2
    })
  ),
  Effect.provideService(References.MinimumLogLevel, "Warn")
)

NodeRuntime.runMain(program, {
  teardown: (exit, onExit) => {
    const code = exit._tag === "Success" ? (exit.value as number) : 1
    onExit(code)
    process.exit(code)
  }
})
