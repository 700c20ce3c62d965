// A service killed between its DB commit and its offset commit, with the consumer driving the
// outbox lifecycle (the default): the process dies at a `SUCCESS` write, after the record's
// transaction (effect + inbox record) committed and before its offset did. A fresh process with
// library defaults must finish every row `SUCCESS` (the redelivered record finds the inbox record
// and reconciles, or the reconciler sweeps it) with every effect applied once (issue 13, R4.4).

import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

describe("a consumer killed between its DB commit and its offset commit, lifecycle on", () => {
  it("rows end SUCCESS and every effect happens once", async () => {
    const events = 1_000
    const keys = 20
    const schema = Support.uniqueName("faults_lifecycle")
    const topic = Support.uniqueName("faults-lifecycle")
    const groupId = `${schema}-group`
    await Support.createTopics(Support.sharedBrokers, [topic, `${topic}.DLT`])
    const stack = await Support.makeStack({ schema })
    const t = await Support.tables(stack)
    const statuses = async () =>
      Object.fromEntries(
        (
          await Support.query<{ status: string; n: number }>(
            stack,
            `SELECT status, count(*)::int AS n FROM ${t.message} GROUP BY status ORDER BY status`
          )
        ).map((s) => [s.status, s.n])
      ) as Record<string, number>
    try {
      await Support.createEffects(stack, schema)
      const ids = await Support.enqueueMany(stack, topic, events, { keys })
      const stopRelay = await Support.startRelay(stack)
      while (((await statuses()).PUBLISHED ?? 0) < events) await Support.sleep(100)
      await stopRelay()

      const script = join(Support.here, "consumer-lifecycle-process.ts")
      const env = {
        FAULTS_SCHEMA: schema,
        FAULTS_TOPIC: topic,
        FAULTS_GROUP: groupId,
        KAFKA_BROKERS: Support.sharedBrokers.join(",")
      }
      // Killed at its 200th SUCCESS write: earlier records finished, some offsets committed.
      const first = Support.spawnNode(script, { ...env, FAULTS_KILL_AT_SUCCESS: "200" })
      const firstExit = await Promise.race([first.exited, Support.sleep(90_000).then(() => "timeout" as const)])
      assert.notStrictEqual(firstExit, "timeout", "the first service reached its 200th SUCCESS write")
      assert.strictEqual(first.process.signalCode, "SIGKILL")

      // The state the kill left: rows whose work committed (inbox record) but whose SUCCESS did not.
      const stranded = (
        await Support.query<{ id: string }>(
          stack,
          `SELECT m.id::text AS id FROM ${t.message} m JOIN ${t.processed} p
             ON p.consumer = '${groupId}' AND p.identity = 'event:' || m.id::text
            WHERE m.status = 'UNDER_PROCESSING'`
        )
      ).map((r) => r.id)
      const effectsAtKill = await Support.effectCounts(stack, schema)
      const atKill = await statuses()

      const restartedAt = Date.now()
      const second = Support.spawnNode(script, env)
      const deadline = Date.now() + 150_000
      while (((await statuses()).SUCCESS ?? 0) < events) {
        if (Date.now() > deadline || second.process.exitCode !== null) {
          throw new Error(`the second service did not finish: ${JSON.stringify(await statuses())}`)
        }
        await Support.sleep(200)
      }
      second.process.kill("SIGTERM")
      await Promise.race([second.exited, Support.sleep(30_000)])
      if (second.process.exitCode === null && second.process.signalCode === null) second.process.kill("SIGKILL")

      const finishedHere = new Set(second.lines.filter((l) => l.startsWith("success ")).map((l) => l.split(" ")[1]!))
      const restartMillis = Date.now() - restartedAt
      const effects = await Support.effectCounts(stack, schema)
      // The reconciler leaves rows younger than its minAge (1 min) alone: a restart that finished
      // sooner did it through redelivery (the consumer found the inbox record).
      const finishedByRestart = stranded.filter((id) => finishedHere.has(id)).length
      const how = restartMillis < 60_000 ? "redelivery, found processed" : "redelivery or the reconciler"
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % keys}` })),
        records,
        effects.total - effects.distinct
      )
      Support.record({
        scenario: "4b consumer SIGKILL after DB commit, lifecycle on",
        ...v,
        note:
          `killed with ${atKill.SUCCESS ?? 0} SUCCESS, ${atKill.UNDER_PROCESSING ?? 0} UNDER_PROCESSING ` +
          `(${stranded.length} with their work committed); ${finishedByRestart} of those SUCCESS ` +
          `${Math.round(restartMillis / 1000)} s after restart (${how})`
      })
      assert.isAbove(stranded.length, 0, "the kill left rows whose work committed without their SUCCESS")
      assert.isAbove(effectsAtKill.distinct, 0)
      assert.strictEqual(finishedByRestart, stranded.length, "the restarted service finished the stranded rows")
      assert.deepStrictEqual(await statuses(), { SUCCESS: events }, "every row ends SUCCESS")
      assert.strictEqual(effects.total, events, "each effect happened once")
      assert.strictEqual(effects.distinct, events)
      assert.strictEqual(v.lost, 0)
    } finally {
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, `${topic}.DLT`])
    }
  })
})
