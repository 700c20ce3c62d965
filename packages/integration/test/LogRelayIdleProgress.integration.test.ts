// The log relay's saved progress is never behind its slot, even while the outbox is idle and the
// slot moves past WAL without events (other tables): that is what lets a slot found ahead of the
// progress be recognised as moved by someone else (created by hand). So an ordinary restart after
// an idle spell reads no gap. The logical cluster (LOGICAL_DATABASE_URL) and the real Kafka.
import { assert, describe, it } from "@effect/vitest"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Support from "./faults/support.ts"

const waitFor = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Support.sleep(100)
  }
}

describe("the log relay's progress while the outbox is idle", () => {
  it("is saved before the slot moves past WAL without events, so a restart reads no gap", async () => {
    const slot = Support.uniqueName("log_idle").toLowerCase()
    const topic = Support.uniqueName("log-idle")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeLogStack({ slot })
    const query = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
      stack.runPromise(Support.logQuery<A>(text, params))
    const positions = async () => {
      const [row] = await query<{ saved: string; slot: string; behind: boolean }>(
        `SELECT p.position::text AS saved, s.confirmed_flush_lsn::text AS slot, p.position < s.confirmed_flush_lsn AS behind
           FROM "${slot}".outbox_log_progress p JOIN pg_replication_slots s ON s.slot_name = p.slot WHERE p.slot = $1`,
        [slot]
      )
      return row
    }
    const gapEvents = () => stack.runPromise(Effect.map(Metric.value(LogRelay.gapEvents), (s) => s.count))
    try {
      let relay = stack.runFork(LogRelay.run())
      const committed = await Support.enqueueLog(stack, topic, 5, { keys: 5, chunk: 5 })
      await waitFor("5 records", async () => (await Support.readTopic(Support.sharedBrokers, topic)).length >= 5)
      const published = (await positions())!.saved
      // WAL without events: transactions on another table.
      await query(`CREATE TABLE "${slot}".other (n int)`)
      for (let i = 0; i < 20; i++) await query(`INSERT INTO "${slot}".other VALUES ($1)`, [i])
      await waitFor("the slot past the other table's WAL", async () => {
        const now = await positions()
        return now !== undefined && now.slot !== published && now.saved !== published
      })
      const idle = (await positions())!
      assert.isFalse(idle.behind, `saved ${idle.saved}, slot ${idle.slot}`)
      // A restart: no gap read back, nothing sent twice.
      await Effect.runPromise(Fiber.interrupt(relay))
      const before = await gapEvents()
      relay = stack.runFork(LogRelay.run())
      const more = await Support.enqueueLog(stack, topic, 5, { keys: 5, chunk: 5, from: 5 })
      await waitFor("10 records", async () => (await Support.readTopic(Support.sharedBrokers, topic)).length >= 10)
      await Support.sleep(1_000)
      await Effect.runPromise(Fiber.interrupt(relay))
      assert.strictEqual((await gapEvents()) - before, 0, "no gap read back")
      const v = Support.verdict([...committed, ...more], await Support.readTopic(Support.sharedBrokers, topic))
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
    } finally {
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  }, 90_000)
})
