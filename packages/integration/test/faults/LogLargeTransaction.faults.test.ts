// One enqueue transaction of 200,000 events (a backfill): a log relay process with the library's
// defaults relays it whole, once, in order, without a crash loop, and its peak memory (VmHWM) is
// reported. A private logical cluster of the test's own, the real Kafka.
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import * as Support from "./support.ts"

const events = Number(process.env.FAULTS_LOG_LARGE_EVENTS ?? 200_000)

const pg = Support.privatePostgres({
  port: Number(process.env.FAULTS_LOG_LARGE_PORT ?? 26512),
  state: mkdtempSync(join(tmpdir(), "effect-outbox-loglarge-"))
})

beforeAll(() => pg.up(), 120_000)
afterAll(async () => {
  await pg.down()
  console.log(`\nfault tests\n${Support.table()}\n`)
})

/** The process's peak resident memory, in MiB (Linux `VmHWM`). */
const peakRss = (pid: number): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmHWM:"))
  return Math.round(Number(line?.match(/(\d+)/)?.[1] ?? 0) / 1024)
}

describe("the log relay and one very large transaction", () => {
  it(`L6 relays a ${events}-event transaction once, in order, in bounded memory`, async () => {
    const slot = Support.uniqueName("faults_large").toLowerCase()
    const topic = Support.uniqueName("faults-large")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeLogStack({ slot, url: pg.url })
    const child = Support.spawnNode(join(Support.here, "log-relay-process.ts"), {
      FAULTS_LOG_SLOT: slot,
      FAULTS_APP_NAME: "log-relay-large",
      LOGICAL_DATABASE_URL: pg.url,
      KAFKA_BROKERS: Support.sharedBrokers.join(",")
    })
    try {
      while (!child.lines.includes("ready")) {
        if (child.process.exitCode !== null) throw new Error(`the relay exited with ${child.process.exitCode}`)
        await Support.sleep(50)
      }
      const idle = peakRss(child.process.pid!)
      const drafts: Array<OutboxDraft> = Array.from({ length: events }, (_, i) => ({
        topic,
        key: `k${i % 200}`,
        payload: Support.payloadOf({ index: i, pad: "x".repeat(200) })
      }))
      const started = Date.now()
      const ids = await stack.runPromise(Outbox.withTransaction(Outbox.enqueue(drafts)))
      const committedIn = Date.now() - started
      const committed = ids.map((id, i) => ({ id, key: drafts[i]!.key! }))
      const deadline = Date.now() + 600_000
      let records = await Support.readTopic(Support.sharedBrokers, topic)
      while (records.length < events) {
        if (child.process.exitCode !== null) throw new Error(`the relay died (exit ${child.process.exitCode})`)
        if (Date.now() > deadline) throw new Error(`${records.length}/${events} records after the deadline`)
        await Support.sleep(2_000)
        records = await Support.readTopic(Support.sharedBrokers, topic)
      }
      const relayedIn = Date.now() - started - committedIn
      await Support.sleep(2_000)
      records = await Support.readTopic(Support.sharedBrokers, topic)
      const peak = peakRss(child.process.pid!)
      const v = Support.verdict(committed, records)
      Support.record({
        scenario: `L6 log relay, one transaction of ${events} events`,
        ...v,
        note: `relay peak RSS ${peak} MiB (${idle} MiB idle); committed in ${committedIn} ms, relayed in ${relayedIn} ms; the relay process never restarted; defaults`
      })
      assert.strictEqual(child.process.exitCode, null)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
    } finally {
      if (child.process.exitCode === null) child.process.kill("SIGKILL")
      await child.exited
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  }, 900_000)
})
