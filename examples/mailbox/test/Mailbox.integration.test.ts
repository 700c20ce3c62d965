// The mailbox on the real PostgreSQL and Kafka: sequential assignment grows the topic, every
// command lands on its user's partition keyed by the canonical id, the consumer drives the
// lifecycle to SUCCESS, and an inapplicable command ends PUSHED_FAILURE on the dead-letter topic.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { RealServices } from "@effect-outbox/testing"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"
import * as Scenario from "../src/Scenario.ts"
import * as Services from "../src/Services.ts"

describe("mailbox on real services", () => {
  it.live(
    "users fill partitions in order, commands follow their user's partition, lifecycle ends SUCCESS | PUSHED_FAILURE",
    () =>
      Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const schema = `mailbox_${runId}`
        const topic = `mailbox.${runId}.commands`
        const report = yield* Scenario.run({
          schema,
          topic,
          groupId: `mailbox-${runId}`,
          users: 5,
          messagesPerUser: 3,
          timeout: "90 seconds"
        }).pipe(
          // Leave the shared services as we found them, pass or fail.
          Effect.ensuring(
            Effect.flatMap(
              Effect.service(SqlClient.SqlClient),
              (sql) => sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`).unprepared
            ).pipe(Effect.ignore)
          ),
          Effect.provide(
            Services.layer({
              databaseUrl: services.databaseUrl,
              brokers: services.kafkaBrokers,
              schema,
              maxPerPartition: 2
            })
          ),
          Effect.provideService(References.MinimumLogLevel, "Error"),
          Effect.ensuring(
            Effect.promise(() => deleteTopics(services.kafkaBrokers, [topic, `${topic}.DLT`]).catch(() => undefined))
          )
        )

        assert.isTrue(report.finished)
        // R6.1 / R6.2: two users per partition, in order; the topic grew from 1 to 3 partitions.
        assert.deepStrictEqual(
          report.users.map((u) => u.partition),
          [0, 0, 1, 1, 2]
        )
        assert.strictEqual(report.partitionCount, 3)
        // R6.3: every record carries its user's id as key and sits on that user's partition.
        const partitionOf = new Map(report.users.map((u) => [u.id as string, u.partition]))
        assert.strictEqual(report.records.length, 5 * 3 + 5 + 1)
        for (const record of report.records) {
          assert.isTrue(partitionOf.has(record.key!), `key ${record.key} is a canonical user id`)
          assert.strictEqual(record.partition, partitionOf.get(record.key!))
        }
        // Applied in order, once: m1 archived, m2 and m3 in the inbox, for every user.
        for (const user of report.users) {
          assert.deepStrictEqual(report.mailboxes.get(user.id), [
            { messageId: "m1", state: "archived" },
            { messageId: "m2", state: "inbox" },
            { messageId: "m3", state: "inbox" }
          ])
        }
        // The lifecycle: all SUCCESS but the inapplicable command, PUSHED_FAILURE and dead-lettered.
        const statuses = [...report.statuses.entries()]
        assert.strictEqual(statuses.length, 21)
        assert.strictEqual(report.statuses.get(report.poisonEventId), "PUSHED_FAILURE")
        assert.isTrue(statuses.every(([id, status]) => id === report.poisonEventId || status === "SUCCESS"))
        assert.deepStrictEqual(report.deadLettered, [report.poisonEventId])
        assert.includeMembers([...report.lifecycle], ["UNDER_PROCESSING -> SUCCESS"])
        assert.isTrue(report.lifecycle.some((step) => step.endsWith("-> UNDER_PROCESSING")))
      }).pipe(Effect.provide(RealServices.layer)),
    { timeout: 180_000 }
  )
})

const deleteTopics = async (brokers: ReadonlyArray<string>, topics: Array<string>) => {
  const admin = new Kafkajs.Kafka({ brokers: [...brokers], logLevel: Kafkajs.logLevel.NOTHING }).admin()
  await admin.connect()
  try {
    await admin.deleteTopics({ topics })
  } finally {
    await admin.disconnect()
  }
}
