// A rebalance in the middle of batches (issue 13, M2/M3): member A works slowly through large
// batches of every partition, with more batches queued behind them, when member B joins the
// group. A's queued batches and the rest of its running batches belong to B after the
// rebalance: A must drop them before their handler runs (only a record in flight at the
// revocation may start on both), and nothing is lost; every effect happens once.

import { afterAll, assert, describe, it } from "@effect/vitest"
import type * as Consumer from "@effect-outbox/core/Consumer"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

describe("a rebalance in the middle of batches", () => {
  it("batches not started are handled once, by the new owner; nothing lost; effects once", async () => {
    const events = 400
    const keys = 20
    const partitions = 4
    const schema = Support.uniqueName("faults_rebalance")
    const topic = Support.uniqueName("faults-rebalance")
    const groupId = `${schema}-group`
    await Support.createTopics(Support.sharedBrokers, [topic, `${topic}.DLT`], partitions)
    const stack = await Support.makeStack({ schema })
    const t = await Support.tables(stack)
    const count = async (status: string) =>
      (
        await Support.query<{ n: number }>(
          stack,
          `SELECT count(*)::int AS n FROM ${t.message} WHERE status = '${status}'`
        )
      )[0]!.n
    const starts: Array<{ readonly member: "A" | "B"; readonly id: string; readonly at: number }> = []
    const consumerOptions = (member: "A" | "B") => ({
      groupId,
      topics: [topic],
      handler: (m: Consumer.Message<typeof Support.EventPayload.Type>) =>
        Effect.sync(() => starts.push({ member, id: m.idempotencyKey, at: Date.now() })).pipe(
          // A slow handler: A's fetched batches take seconds, so batches wait in its buffers.
          Effect.andThen(Effect.sleep("20 millis")),
          Effect.andThen(Support.insertEffect(schema, m.idempotencyKey, m.record))
        )
    })
    const running: Array<Support.RunningConsumer> = []
    try {
      await Support.createEffects(stack, schema)
      const ids = await Support.enqueueMany(stack, topic, events, { keys })
      const stopRelay = await Support.startRelay(stack)
      while ((await count("PUBLISHED")) < events) await Support.sleep(100)
      await stopRelay()
      const revokedBefore = (await stack.runPromise(Metric.value(Telemetry.consumerRevokedRecordsTotal))).count

      running.push(await Support.startConsumer(stack, consumerOptions("A")))
      while (starts.length < 40) {
        assert.isUndefined(running[0]!.failure())
        await Support.sleep(50)
      }
      const joinedAt = Date.now()
      running.push(await Support.startConsumer(stack, consumerOptions("B")))
      const deadline = Date.now() + 150_000
      while ((await count("SUCCESS")) < events) {
        for (const r of running) assert.isUndefined(r.failure())
        if (Date.now() > deadline) throw new Error(`not finished: ${await count("SUCCESS")} SUCCESS of ${events}`)
        await Support.sleep(200)
      }
      for (const r of running.splice(0)) await r.stop()

      const revoked =
        (await stack.runPromise(Metric.value(Telemetry.consumerRevokedRecordsTotal))).count - revokedBefore
      const startsById = new Map<string, Array<"A" | "B">>()
      for (const s of starts) startsById.set(s.id, [...(startsById.get(s.id) ?? []), s.member])
      const twice = [...startsById.values()].filter((members) => members.length > 1)
      const bFirst = starts.find((s) => s.member === "B")?.at
      const effects = await Support.effectCounts(stack, schema)
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % keys}` })),
        records,
        effects.total - effects.distinct
      )
      Support.record({
        scenario: "consumer rebalance mid-batch (second member joins)",
        ...v,
        note:
          `${twice.length} handler starts twice (bound: records in flight, ${partitions}); ` +
          `${revoked} queued/unstarted records dropped by the revoked member; ` +
          `B's first handler ${bFirst === undefined ? "never" : `${((bFirst - joinedAt) / 1000).toFixed(1)} s`} after joining; ` +
          `handled by A ${starts.filter((s) => s.member === "A").length}, by B ${starts.filter((s) => s.member === "B").length}`
      })
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(await count("SUCCESS"), events, "every row ends SUCCESS")
      assert.strictEqual(effects.total, events, "each effect happened once")
      assert.strictEqual(effects.distinct, events)
      assert.strictEqual(startsById.size, events, "every record's handler ran")
      assert.isAtMost(twice.length, partitions, "only records in flight at the revocation start twice")
      assert.isAbove(revoked, 0, "the revoked member dropped batches it had not started")
      assert.isDefined(bFirst, "the new member got partitions")
    } finally {
      for (const r of running) await r.stop().catch(() => undefined)
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, `${topic}.DLT`])
    }
  })
})
