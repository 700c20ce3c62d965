// The log relay under a crash: relay processes on one slot of a wal_level=logical
// PostgreSQL (LOGICAL_DATABASE_URL) and the real Kafka; the one holding the slot's lease is
// SIGKILLed mid-stream, repeatedly, while events keep being committed; a standby takes the slot
// over each time. Library defaults (LogRelay.run()), on each Kafka adapter.
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const kills = Number(process.env.FAULTS_LOG_KILLS ?? 4)

/** The application name of the session holding the slot's lease, if any. */
const leaseHolder = async (stack: Support.LogStack, slot: string): Promise<string | undefined> => {
  const rows = await stack.runPromise(
    Support.logQuery<{ name: string }>(
      `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.objid::bigint = (hashtext($1)::bigint & 4294967295)`,
      [slot]
    )
  )
  return rows[0]?.name
}

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

describe.each([
  ["kafkajs", "L1"],
  ["platformatic", "L2"]
] as const)("a log relay process on %s killed with SIGKILL mid-stream", (kafka, id) => {
  it("a standby takes the slot over: nothing lost, per-key order kept, duplicates bounded by a window", async () => {
    const before = 10_000
    const during = 6_000
    const keys = 200
    const slot = Support.uniqueName("faults_log").toLowerCase()
    const topic = Support.uniqueName("faults-log")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeLogStack({ slot })
    const script = join(Support.here, "log-relay-process.ts")
    const children: Array<Support.Child> = []
    let started = 0
    const spawn = async () => {
      const name = `log-relay-${++started}`
      const child = Support.spawnNode(script, {
        FAULTS_LOG_SLOT: slot,
        FAULTS_APP_NAME: name,
        FAULTS_KAFKA: kafka,
        KAFKA_BROKERS: Support.sharedBrokers.join(",")
      })
      children.push(child)
      while (!child.lines.includes("ready")) {
        if (child.process.exitCode !== null) throw new Error(`log relay process exited with ${child.process.exitCode}`)
        await Support.sleep(50)
      }
      return { name, child }
    }
    try {
      const committed = [...(await Support.enqueueLog(stack, topic, before, { keys, chunk: 100 }))]
      const relays = [await spawn(), await spawn()]
      // Events keep being committed while relays die.
      const producing = (async () => {
        for (let from = before; from < before + during; from += 200) {
          committed.push(...(await Support.enqueueLog(stack, topic, 200, { keys, chunk: 100, from })))
          await Support.sleep(300)
        }
      })()
      const takeovers: Array<string> = []
      const deadline = Date.now() + 180_000
      for (let k = 0; k < kills; k++) {
        // Wait for a holder that is publishing, then kill it somewhere inside its stream.
        let holder = await leaseHolder(stack, slot)
        while (holder === undefined) {
          if (Date.now() > deadline) throw new Error("no relay took the slot's lease")
          await Support.sleep(100)
          holder = await leaseHolder(stack, slot)
        }
        await Support.sleep(200 + Math.floor(Math.random() * 800))
        const victim = relays.find((r) => r.name === holder)!
        const onTopic = await topicCount(topic)
        victim.child.process.kill("SIGKILL")
        await victim.child.exited
        relays.splice(relays.indexOf(victim), 1)
        relays.push(await spawn())
        let next = await leaseHolder(stack, slot)
        while (next === undefined || next === holder) {
          if (Date.now() > deadline) throw new Error(`no standby took the slot over from ${holder}`)
          await Support.sleep(100)
          next = await leaseHolder(stack, slot)
        }
        takeovers.push(`${holder}→${next} at ${onTopic}/${committed.length}`)
      }
      await producing
      const events = before + during
      while ((await topicCount(topic)) < events) {
        if (Date.now() > deadline) throw new Error(`${await topicCount(topic)}/${events} records after the deadline`)
        await Support.sleep(250)
      }
      await Support.sleep(2_000) // a late duplicate would land here
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(committed, records)
      Support.record({
        scenario: `${id} log relay on ${kafka} SIGKILL ×${kills}, standby takes the slot`,
        ...v,
        note: `killed at published/committed: ${takeovers.map((t) => t.split(" at ")[1]).join(", ")}; defaults (window 500, up to 4,000 while a backlog lasts)`
      })
      assert.strictEqual(committed.length, events)
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      // The takeover probe leaves nothing of the unconfirmed window to re-send; at most a window
      // (up to maxWindow, 8 × 500 log rows, whole transactions of 100) per kill if probes missed.
      assert.isAtMost(v.duplicatesDelivered, kills * 4_100)
      assert.strictEqual(takeovers.length, kills)
    } finally {
      for (const child of children) if (child.process.exitCode === null) child.process.kill("SIGKILL")
      await Promise.all(children.map((c) => c.exited))
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
