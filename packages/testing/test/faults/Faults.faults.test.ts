// Fault tests against the real PostgreSQL and Kafka (`pnpm test:faults`). Each scenario breaks a
// real piece — a relay process, the broker, database connections, a consumer process, the input
// — and a checker reads the topic and the tables at the end. The table printed at the end has,
// per scenario: events, lost, duplicates delivered, duplicate effects, order violations.
import { afterAll, assert, describe, it } from "@effect/vitest"
import { join } from "node:path"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

describe("a relay process killed with SIGKILL while draining", () => {
  it("loses nothing, duplicates only batches in flight, keeps per-key order", async () => {
    const events = Number(process.env.FAULTS_KILL_EVENTS ?? 20_000)
    const keys = 200
    const schema = Support.uniqueName("faults_kill")
    const topic = Support.uniqueName("faults-kill")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeStack({ schema })
    const t = await Support.tables(stack)
    try {
      const ids = await Support.enqueueMany(stack, topic, events, { keys })
      const unpublished = async () =>
        (await Support.query<{ n: number }>(stack, `SELECT count(*)::int AS n FROM ${t.message} WHERE status IN ('PENDING','DISPATCHING')`))[0]!.n

      const script = join(Support.here, "relay-process.ts")
      let kills = 0
      const maxKills = 8
      const deadline = Date.now() + 240_000
      while (true) {
        const child = Support.spawnNode(script, { FAULTS_SCHEMA: schema, KAFKA_BROKERS: Support.sharedBrokers.join(",") })
        while (!child.lines.includes("ready")) {
          if (child.process.exitCode !== null) throw new Error(`relay process exited with ${child.process.exitCode}`)
          await Support.sleep(50)
        }
        if (kills < maxKills && (await unpublished()) > 0) {
          // A random point: after start-up, somewhere inside the drain.
          await Support.sleep(300 + Math.floor(Math.random() * 1500))
          child.process.kill("SIGKILL")
          await child.exited
          kills++
          continue
        }
        while ((await unpublished()) > 0) {
          if (Date.now() > deadline) throw new Error(`still ${await unpublished()} unpublished after the deadline`)
          await Support.sleep(200)
        }
        child.process.kill("SIGKILL")
        await child.exited
        break
      }

      const statuses = await Support.query<{ status: string; n: number }>(stack, `SELECT status, count(*)::int AS n FROM ${t.message} GROUP BY status`)
      assert.deepStrictEqual(statuses.map((s) => [s.status, s.n]), [["PUBLISHED", events]], "every row ends PUBLISHED, no lease left")
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(ids.map((id, i) => ({ id, key: `k${i % keys}` })), records)
      Support.record({ scenario: "1 relay SIGKILL ×" + kills, ...v, note: `${kills} kills; batch 100` })
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.isAtMost(v.duplicatesDelivered, kills * 100, "duplicates come only from batches in flight at a kill")
      assert.isAbove(kills, 0)
    } finally {
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
