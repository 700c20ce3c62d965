// One enqueue transaction of 200,000 events (a backfill): a log relay process with the library's
// defaults relays it whole, once, in order, in bounded memory (its peak resident memory, VmHWM,
// stays under a bound the test asserts), and a relay SIGKILLed in the middle of it is replaced by
// one that resumes after the parts already saved, without a crash loop. A private logical
// cluster of the test's own, the real Kafka.
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import * as Support from "./support.ts"

const events = Number(process.env.FAULTS_LOG_LARGE_EVENTS ?? 200_000)
/**
 * The relay's peak RSS bound (MiB): the streaming buffer (32 MiB of wire bytes by default, decoded
 * a few times larger), the Kafka client's buffers and the runtime. The whole 200,000-event
 * transaction decoded at once peaked at 540-573 MiB.
 */
const rssBound = Number(process.env.FAULTS_LOG_LARGE_RSS_MIB ?? 300)
const heapMib = Number(process.env.FAULTS_LOG_LARGE_HEAP_MIB ?? 128)

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

const startRelay = async (slot: string, name: string) => {
  const child = Support.spawnNode(join(Support.here, "log-relay-process.ts"), {
    FAULTS_LOG_SLOT: slot,
    FAULTS_APP_NAME: name,
    LOGICAL_DATABASE_URL: pg.url,
    KAFKA_BROKERS: Support.sharedBrokers.join(","),
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --max-old-space-size=${heapMib}`.trim()
  })
  while (!child.lines.includes("ready")) {
    if (child.process.exitCode !== null) throw new Error(`the relay exited with ${child.process.exitCode}`)
    await Support.sleep(50)
  }
  return child
}

type Relay = Awaited<ReturnType<typeof startRelay>>

/** Waits until the topic holds every event, failing if the relay process dies. */
const relayedAll = async (child: Relay, topic: string) => {
  const deadline = Date.now() + 600_000
  let records = await Support.readTopic(Support.sharedBrokers, topic)
  while (records.length < events) {
    if (child.process.exitCode !== null) throw new Error(`the relay died (exit ${child.process.exitCode})`)
    if (Date.now() > deadline) throw new Error(`${records.length}/${events} records after the deadline`)
    await Support.sleep(2_000)
    records = await Support.readTopic(Support.sharedBrokers, topic)
  }
  // Anything sent twice would land now.
  await Support.sleep(2_000)
  return Support.readTopic(Support.sharedBrokers, topic)
}

const drafts = (topic: string): Array<OutboxDraft> =>
  Array.from({ length: events }, (_, i) => ({
    topic,
    key: `k${i % 200}`,
    payload: Support.payloadOf({ index: i, pad: "x".repeat(200) })
  }))

/** A slot, a topic, the writer's stack; cleaned up after `body`. */
const withLog = async (name: string, body: (slot: string, topic: string, stack: Support.LogStack) => Promise<void>) => {
  const slot = Support.uniqueName(name).toLowerCase()
  const topic = Support.uniqueName(name.replaceAll("_", "-"))
  await Support.createTopics(Support.sharedBrokers, [topic])
  const stack = await Support.makeLogStack({ slot, url: pg.url })
  try {
    await body(slot, topic, stack)
  } finally {
    await Support.dropLogSlot(stack, slot)
    await stack.dispose()
    await Support.deleteTopics(Support.sharedBrokers, [topic])
  }
}

const stop = async (child: Relay) => {
  if (child.process.exitCode === null) child.process.kill("SIGKILL")
  await child.exited
}

describe("the log relay and one very large transaction", () => {
  it(`L6 relays a ${events}-event transaction once, in order, in bounded memory`, async () => {
    await withLog("faults_large", async (slot, topic, stack) => {
      const child = await startRelay(slot, "log-relay-large")
      try {
        const idle = peakRss(child.process.pid!)
        const all = drafts(topic)
        const started = Date.now()
        const ids = await stack.runPromise(Outbox.withTransaction(Outbox.enqueue(all)))
        const committedIn = Date.now() - started
        const records = await relayedAll(child, topic)
        const relayedIn = Date.now() - started - committedIn
        const peak = peakRss(child.process.pid!)
        const v = Support.verdict(
          ids.map((id, i) => ({ id, key: all[i]!.key! })),
          records
        )
        Support.record({
          scenario: `L6 log relay, one transaction of ${events} events`,
          ...v,
          note: `relay peak RSS ${peak} MiB (${idle} MiB idle, bound ${rssBound}); committed in ${committedIn} ms, relayed in ${relayedIn} ms; the relay process never restarted; defaults`
        })
        assert.strictEqual(child.process.exitCode, null)
        assert.strictEqual(v.lost, 0)
        assert.strictEqual(v.duplicatesDelivered, 0)
        assert.strictEqual(v.orderViolations, 0)
        assert.isBelow(peak, rssBound, `the relay's peak RSS (${peak} MiB) stays under ${rssBound} MiB`)
      } finally {
        await stop(child)
      }
    })
  }, 900_000)

  it(`L6b a relay SIGKILLed inside the ${events}-event transaction: the next resumes after the saved parts, no crash loop`, async () => {
    await withLog("faults_large_kill", async (slot, topic, stack) => {
      const first = await startRelay(slot, "log-relay-large-1")
      let second: Relay | undefined
      try {
        const all = drafts(topic)
        const ids = await stack.runPromise(Outbox.withTransaction(Outbox.enqueue(all)))
        // Killed once a fifth of the transaction is saved as published (durable part progress).
        const progress = `SELECT part_done::float8 AS done FROM "${slot}"."outbox_log_progress" WHERE slot = $1`
        let done = 0
        const deadline = Date.now() + 300_000
        while (done < events / 5) {
          if (first.process.exitCode !== null) throw new Error(`the relay died (exit ${first.process.exitCode})`)
          if (Date.now() > deadline) throw new Error(`only ${done} events saved as published`)
          await Support.sleep(200)
          const rows = await stack.runPromise(Support.logQuery<{ done: number | null }>(progress, [slot]))
          done = Number(rows[0]?.done ?? 0)
        }
        await stop(first)
        second = await startRelay(slot, "log-relay-large-2")
        const records = await relayedAll(second, topic)
        const peak = peakRss(second.process.pid!)
        const v = Support.verdict(
          ids.map((id, i) => ({ id, key: all[i]!.key! })),
          records
        )
        Support.record({
          scenario: `L6b log relay SIGKILLed inside a transaction of ${events} events, then restarted`,
          ...v,
          note: `killed with ${done} events saved as published; the restarted relay's peak RSS ${peak} MiB (bound ${rssBound}); it never exited; defaults`
        })
        assert.strictEqual(second.process.exitCode, null, "the restarted relay did not crash")
        assert.strictEqual(v.lost, 0)
        assert.strictEqual(v.orderViolations, 0)
        // At most the part being published when the relay died (the probe finds it): one window.
        assert.isAtMost(v.duplicatesDelivered, 4_000)
        assert.isBelow(peak, rssBound)
      } finally {
        await stop(first)
        if (second !== undefined) await stop(second)
      }
    })
  }, 900_000)
})
