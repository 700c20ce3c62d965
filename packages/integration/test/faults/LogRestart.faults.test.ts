// The log relay across a PostgreSQL restart: a server restart (a crash, `-m immediate`, or a clean
// `-m fast`) moves a logical slot's confirmed position back to its last save, and the slot gives
// again what the relay had confirmed since. The relay's own durable progress (the outbox schema's
// log_progress row) shows those events already published: they are confirmed, not re-sent.
// On a private logical cluster of its own (scripts/services pg-private), the real Kafka, and
// the library's defaults (PgLogOutbox.layer, LogRelay.run()).
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

const pg = Support.privatePostgres({
  port: Support.privatePort("FAULTS_LOG_RESTART_PORT", 26510),
  state: mkdtempSync(join(tmpdir(), "effect-outbox-logrestart-"))
})

beforeAll(() => pg.up(), 120_000)
afterAll(async () => {
  await pg.down()
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const topicCount = async (topic: string): Promise<number> => {
  const admin = Support.kafka(Support.sharedBrokers).admin()
  await admin.connect()
  try {
    const offsets = await admin.fetchTopicOffsets(topic)
    return offsets.reduce((s, o) => s + Number(o.high) - Number(o.low), 0)
  } finally {
    await admin.disconnect()
  }
}

const waitFor = async (what: string, condition: () => Promise<boolean>, ms = 120_000) => {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Support.sleep(200)
  }
}

describe.each([
  ["immediate", "L3"],
  ["fast", "L4"]
] as const)("the log relay across a PostgreSQL restart (-m %s)", (mode, id) => {
  it("after 10,000 confirmed events: the rewound slot is not re-sent, nothing lost, order kept", async () => {
    const slot = Support.uniqueName(`faults_restart_${mode}`).toLowerCase()
    const topic = Support.uniqueName(`faults-restart-${mode}`)
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeLogStack({ slot, url: pg.url })
    const slotState = (past = "0/0") =>
      stack
        .runPromise(
          Support.logQuery<{ confirmed: string; progress: string | null; done: boolean }>(
            // The log stack's tables are in a schema named after its slot.
            `SELECT s.confirmed_flush_lsn::text AS confirmed, p.position::text AS progress,
                    s.confirmed_flush_lsn >= $2::pg_lsn AS done
               FROM pg_replication_slots s LEFT JOIN "${slot}".outbox_log_progress p ON p.slot = s.slot_name
              WHERE s.slot_name = $1`,
            [slot, past]
          )
        )
        .then((rows) => rows[0])
    const skipped = () => stack.runPromise(Metric.value(LogRelay.rewindSkipped)).then((s) => s.count)
    const relay = stack.runFork(LogRelay.run())
    try {
      // 10,000 events in 1,000 transactions over 200 keys, all published and confirmed.
      const committed = [...(await Support.enqueueLog(stack, topic, 10_000, { keys: 200, chunk: 10 }))]
      await waitFor("10,000 published", async () => (await topicCount(topic)) >= 10_000)
      // The slot confirmed past the last event (the WAL position once all 10,000 were on the broker).
      const [{ lsn }] = await stack.runPromise(
        Support.logQuery<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn")
      )
      await waitFor("the last window confirmed", async () => (await slotState(lsn))?.done === true)
      const before = (await slotState())!
      const skippedBefore = await skipped()

      await pg.stop(mode)
      await pg.start()
      // 1,000 more after the restart, on the same keys: they must follow, in order.
      let more: ReadonlyArray<{ id: string; key: string }> = []
      await waitFor("the server to take writes", async () => {
        more = await Support.enqueueLog(stack, topic, 1_000, { keys: 200, chunk: 10, from: 10_000 }).catch(() => [])
        return more.length === 1_000
      })
      committed.push(...more)
      await waitFor("11,000 published", async () => (await topicCount(topic)) >= 11_000)
      await Support.sleep(3_000) // a late re-send would land here
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(committed, records)
      const rewound = (await skipped()) - skippedBefore
      Support.record({
        scenario: `${id} log relay, PostgreSQL restarted (-m ${mode}) after 10,000 confirmed events`,
        ...v,
        note: `slot confirmed at ${before.confirmed}, progress ${before.progress} before the stop; ${rewound} events given again by the rewound slot and skipped by the relay's progress; defaults`
      })
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(records.length, 11_000)
    } finally {
      await stack.runPromise(Fiber.interrupt(relay))
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  }, 300_000)
})
