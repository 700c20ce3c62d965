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
/** Characters of padding in each event's payload: 200 (~250-byte payloads); 1 000 makes the transaction ~200 MB. */
const pad = Number(process.env.FAULTS_LOG_LARGE_PAD ?? 200)
/**
 * The memory bound. The relay process collects garbage every 250 ms and reports what is live
 * (heap used and array buffers, `log-relay-process.ts`): past what it held idle, that stays under
 * `liveBound` MiB, whatever the transaction's size, where a relay that held the transaction at
 * once needs it all. The streaming buffer is `FAULTS_LOG_MAX_BUFFERED` (default here 8 MiB of wire
 * bytes); its events decoded, the part being published and the Kafka client's batch are the rest.
 * The peak resident memory (`VmHWM`) is reported too.
 */
const maxBuffered = Number(process.env.FAULTS_LOG_MAX_BUFFERED ?? 8 * 1024 * 1024)
const liveBound = Number(process.env.FAULTS_LOG_LARGE_LIVE_MIB ?? 64)

const pg = Support.privatePostgres({
  port: Support.privatePort("FAULTS_LOG_LARGE_PORT", 26512),
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

/** Neither exited nor killed (out of heap, V8 aborts: a signal, no exit code). */
const running = (child: Support.Child) => child.process.exitCode === null && child.process.signalCode === null

const startRelay = async (slot: string, name: string) => {
  const child = Support.spawnNode(join(Support.here, "log-relay-process.ts"), {
    FAULTS_LOG_SLOT: slot,
    FAULTS_APP_NAME: name,
    LOGICAL_DATABASE_URL: pg.url,
    KAFKA_BROKERS: Support.sharedBrokers.join(","),
    FAULTS_LOG_MAX_BUFFERED: String(maxBuffered),
    FAULTS_LIVE_MEMORY: "1",
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --expose-gc`.trim()
  })
  while (!child.lines.includes("ready")) {
    if (!running(child)) throw new Error(`the relay exited with ${child.process.exitCode ?? child.process.signalCode}`)
    await Support.sleep(50)
  }
  return child
}

type Relay = Support.Child

/** The most the relay held live so far (MiB), from its `live <n>` lines. */
const livePeak = (child: Relay, from = 0): number =>
  Math.max(0, ...child.lines.slice(from).flatMap((l) => (l.startsWith("live ") ? [Number(l.slice(5))] : [])))

/** Waits until the topic holds every event, failing if the relay process dies. */
const relayedAll = async (child: Relay, topic: string) => {
  const deadline = Date.now() + 600_000
  let records = await Support.readTopic(Support.sharedBrokers, topic)
  while (records.length < events) {
    if (!running(child)) throw new Error(`the relay died (${child.process.exitCode ?? child.process.signalCode})`)
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
    payload: Support.payloadOf({ index: i, pad: "x".repeat(pad) })
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
  if (running(child)) child.process.kill("SIGKILL")
  await child.exited
}

describe("the log relay and one very large transaction", () => {
  it(`L6 relays a ${events}-event transaction once, in order, in bounded memory`, async () => {
    await withLog("faults_large", async (slot, topic, stack) => {
      const child = await startRelay(slot, "log-relay-large")
      try {
        await Support.sleep(1_000)
        const idle = peakRss(child.process.pid!)
        const idleLive = livePeak(child)
        const mark = child.lines.length
        const all = drafts(topic)
        const started = Date.now()
        const ids = await stack.runPromise(Outbox.withTransaction(Outbox.enqueue(all)))
        const committedIn = Date.now() - started
        const records = await relayedAll(child, topic)
        const relayedIn = Date.now() - started - committedIn
        const peak = peakRss(child.process.pid!)
        const live = livePeak(child, mark) - idleLive
        const v = Support.verdict(
          ids.map((id, i) => ({ id, key: all[i]!.key! })),
          records
        )
        Support.record({
          scenario: `L6 log relay, one transaction of ${events} events${pad === 200 ? "" : ` (payload pad ${pad})`}`,
          ...v,
          note: `live memory at most ${live} MiB above idle (${idleLive} MiB; bound ${liveBound}), peak RSS ${peak} MiB (${idle} MiB idle); committed in ${committedIn} ms, relayed in ${relayedIn} ms; the relay process never restarted; defaults but maxBufferedBytes ${maxBuffered / 1_048_576} MiB`
        })
        assert.isTrue(running(child), "the relay never died")
        assert.strictEqual(v.lost, 0)
        assert.strictEqual(v.duplicatesDelivered, 0)
        assert.strictEqual(v.orderViolations, 0)
        assert.isAtMost(live, liveBound, `the relay held ${live} MiB above idle at most, bound ${liveBound}`)
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
          if (!running(first)) throw new Error(`the relay died (${first.process.exitCode ?? first.process.signalCode})`)
          if (Date.now() > deadline) throw new Error(`only ${done} events saved as published`)
          await Support.sleep(200)
          const rows = await stack.runPromise(Support.logQuery<{ done: number | null }>(progress, [slot]))
          done = Number(rows[0]?.done ?? 0)
        }
        await stop(first)
        second = await startRelay(slot, "log-relay-large-2")
        await Support.sleep(1_000)
        const idleLive = livePeak(second)
        const mark = second.lines.length
        const records = await relayedAll(second, topic)
        const peak = peakRss(second.process.pid!)
        const live = livePeak(second, mark) - idleLive
        const v = Support.verdict(
          ids.map((id, i) => ({ id, key: all[i]!.key! })),
          records
        )
        Support.record({
          scenario: `L6b log relay SIGKILLed inside a transaction of ${events} events, then restarted`,
          ...v,
          note: `killed with ${done} events saved as published; the restarted relay held at most ${live} MiB live above idle (bound ${liveBound}), peak RSS ${peak} MiB; it never exited; defaults but maxBufferedBytes ${maxBuffered / 1_048_576} MiB`
        })
        assert.isTrue(running(second), "the restarted relay did not crash")
        assert.strictEqual(v.lost, 0)
        assert.strictEqual(v.orderViolations, 0)
        // At most the part being published when the relay died (the probe finds it): one window.
        assert.isAtMost(v.duplicatesDelivered, 4_000)
        assert.isAtMost(live, liveBound)
      } finally {
        await stop(first)
        if (second !== undefined) await stop(second)
      }
    })
  }, 900_000)
})
