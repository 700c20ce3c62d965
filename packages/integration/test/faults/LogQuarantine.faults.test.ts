// One event the broker refuses for good (its topic does not exist) among 1,000 on a topic that
// does: the relay moves it to its quarantine (`<schema>.outbox_log_quarantine`), holds the later
// events of its topic and key behind it, and every other event flows. After the topic is created,
// `PgLogQuarantine.retry` publishes the event and its followers, in order. A private logical
// cluster of the test's own, the real Kafka, the library's defaults.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Support from "./support.ts"

const pg = Support.privatePostgres({
  port: Support.privatePort("FAULTS_LOG_QUARANTINE_PORT", 26511),
  state: mkdtempSync(join(tmpdir(), "effect-outbox-logquarantine-"))
})

beforeAll(() => pg.up(), 120_000)
afterAll(async () => {
  await pg.down()
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const waitFor = async (what: string, condition: () => Promise<boolean>, ms = 120_000) => {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Support.sleep(200)
  }
}

describe("the log relay and an event the broker refuses for good", () => {
  it("L5 is quarantined with its key's later events; the others flow; retry publishes them in order", async () => {
    const slot = Support.uniqueName("faults_quarantine").toLowerCase()
    const live = Support.uniqueName("faults-quarantine-live")
    const missing = Support.uniqueName("faults-quarantine-missing")
    await Support.createTopics(Support.sharedBrokers, [live])
    const stack = await Support.makeLogStack({ slot, url: pg.url })
    const relay = stack.runFork(LogRelay.run())
    try {
      // 1,000 events on `live` over 20 keys, in transactions of 10; after the 300th, 600th and
      // 900th, one event of key `held` for the topic that does not exist.
      const drafts: Array<OutboxDraft> = []
      for (let i = 0; i < 1_000; i++) {
        drafts.push({ topic: live, key: `k${i % 20}`, payload: Support.payloadOf({ index: i, pad: "x".repeat(200) }) })
        if (i === 299 || i === 599 || i === 899) {
          drafts.push({ topic: missing, key: "held", payload: Support.payloadOf({ index: i, pad: "" }) })
        }
      }
      const ids = await stack.runPromise(
        Effect.gen(function* () {
          const out: Array<string> = []
          for (let i = 0; i < drafts.length; i += 10) {
            out.push(...(yield* Outbox.withTransaction(Outbox.enqueue(drafts.slice(i, i + 10)))))
          }
          return out
        })
      )
      const committed = drafts.map((d, i) => ({ id: ids[i]!, key: d.key!, topic: d.topic }))
      const onLive = committed.filter((c) => c.topic === live)
      const held = committed.filter((c) => c.topic === missing)

      const quarantine = () =>
        stack
          .runPromise(PgLogQuarantine.list({ slot, schema: slot }))
          .then((events) => events.map((e) => `${e.eventId}:${e.status}`))
      await waitFor(
        "the 1,000 live events",
        async () => (await Support.readTopic(Support.sharedBrokers, live)).length >= 1_000
      )
      await waitFor(
        "the refused event and its followers in the quarantine",
        async () => (await quarantine()).length === 3
      )
      const first = await stack.runPromise(PgLogQuarantine.list({ slot, schema: slot }))
      assert.deepStrictEqual(
        first.map((e) => `${e.eventId}:${e.status}`),
        [`${held[0]!.id}:QUARANTINED`, `${held[1]!.id}:HELD`, `${held[2]!.id}:HELD`]
      )
      assert.match(first[0]!.reason, /does not exist/)
      const liveRecords = await Support.readTopic(Support.sharedBrokers, live)
      const v = Support.verdict(onLive, liveRecords)

      // A dry run moves nothing; after the topic exists, retry publishes the three in order.
      const dry = await stack.runPromise(
        PgLogQuarantine.retry({ slot, schema: slot, eventId: held[0]!.id, by: "faults", execute: false })
      )
      assert.strictEqual(dry.events.length, 3)
      assert.deepStrictEqual(await quarantine(), [
        `${held[0]!.id}:QUARANTINED`,
        `${held[1]!.id}:HELD`,
        `${held[2]!.id}:HELD`
      ])
      await Support.createTopics(Support.sharedBrokers, [missing])
      await stack.runPromise(
        PgLogQuarantine.retry({ slot, schema: slot, eventId: held[0]!.id, by: "faults", execute: true })
      )
      await waitFor(
        "the retried events",
        async () => (await Support.readTopic(Support.sharedBrokers, missing)).length >= 3
      )
      await Support.sleep(2_000) // a late duplicate would land here
      const retried = await Support.readTopic(Support.sharedBrokers, missing)
      const after = await stack.runPromise(PgLogQuarantine.list({ slot, schema: slot }))
      const vHeld = Support.verdict(held, retried)
      Support.record({
        scenario: "L5 log relay, 1 event for a missing topic (+2 of its key behind it) among 1,000",
        events: v.events + vHeld.events,
        lost: v.lost + vHeld.lost,
        duplicatesDelivered: v.duplicatesDelivered + vHeld.duplicatesDelivered,
        duplicateEffects: 0,
        orderViolations: v.orderViolations + vHeld.orderViolations,
        note: `1,000 live published while 1 was QUARANTINED and 2 HELD; after the topic was created and retry, the 3 published in order (${after.map((e) => e.status).join(", ")}); defaults`
      })
      assert.deepStrictEqual(
        { lost: v.lost, duplicates: v.duplicatesDelivered, order: v.orderViolations },
        { lost: 0, duplicates: 0, order: 0 }
      )
      assert.deepStrictEqual(
        retried.map((r) => r.eventId),
        held.map((h) => h.id)
      )
      assert.deepStrictEqual(
        after.map((e) => [e.status, e.resolvedBy]),
        [
          ["RETRIED", "faults"],
          ["RETRIED", "faults"],
          ["RETRIED", "faults"]
        ]
      )
    } finally {
      await stack.runPromise(Fiber.interrupt(relay))
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [live, missing])
    }
  }, 300_000)
})
