// The log relay across a database fail-over on PostgreSQL 15/16, whose logical slots are not
// copied to a physical standby: the runbook of docs/log-relay-operations.md ("Fail-over") on real
// services. A private primary (wal_level logical) and a streaming standby made from it with
// `pg_basebackup -R`; the relay runs on the primary with the library's defaults while events are
// committed; the test waits until the standby replayed everything the primary wrote (so PostgreSQL
// itself loses nothing), crashes the primary (`-m immediate`) and promotes the standby. A relay
// against the new primary finds no slot and publishes nothing; more events are committed; the
// runbook's step (`PgLogSource.ensureSlot` on the new primary) creates the slot, and the relay
// reads the gap back from the event table before the new slot's events.
import { execFileSync } from "node:child_process"
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import pg from "pg"
import * as Support from "./support.ts"

const state = process.env.FAULTS_LOG_FAILOVER_STATE ?? mkdtempSync(join(tmpdir(), "effect-outbox-logfailover-"))
const primary = Support.privatePostgres({
  port: Support.privatePort("FAULTS_LOG_FAILOVER_PORT", 26514),
  state: join(state, "primary")
})
const standbyPort = Support.privatePort("FAULTS_LOG_FAILOVER_STANDBY_PORT", 26515)
const standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/postgres`
const standbyData = join(state, "standby")

// The server binaries as scripts/services finds them; run as `postgres` when we are root.
const bin = (name: string): string => {
  const dir =
    process.env.PG_BIN ??
    (existsSync("/usr/lib/postgresql/15/bin/initdb")
      ? "/usr/lib/postgresql/15/bin"
      : execFileSync("pg_config", ["--bindir"]).toString().trim())
  return join(dir, name)
}
const asPostgres = (name: string, args: ReadonlyArray<string>) =>
  process.getuid?.() === 0
    ? Support.run("runuser", ["-u", "postgres", "--", bin(name), ...args])
    : Support.run(bin(name), args)

const standby = {
  /** A physical standby of the primary: a base backup with its WAL, streaming from it (`-R`). */
  up: async () => {
    mkdirSync(standbyData, { recursive: true })
    chmodSync(standbyData, 0o700)
    if (process.getuid?.() === 0) await Support.run("chown", ["postgres:", standbyData])
    await asPostgres("pg_basebackup", [
      ...["-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", standbyData],
      ...["-R", "-X", "stream", "-c", "fast"]
    ])
    appendFileSync(join(standbyData, "postgresql.conf"), `\nport = ${standbyPort}\nhot_standby = on\n`)
    await asPostgres("pg_ctl", ["start", "-w", "-t", "60", "-D", standbyData, "-l", join(standbyData, "server.log")])
  },
  promote: () => asPostgres("pg_ctl", ["promote", "-w", "-t", "60", "-D", standbyData]),
  down: async () => {
    await asPostgres("pg_ctl", ["stop", "-m", "immediate", "-D", standbyData]).catch(() => "")
    await Support.run("rm", ["-rf", standbyData]).catch(() => "")
  }
}

const onStandby = async <A>(text: string, params: ReadonlyArray<unknown> = []): Promise<Array<A>> => {
  const client = new pg.Client({ connectionString: standbyUrl })
  await client.connect()
  try {
    return (await client.query(text, [...params])).rows as Array<A>
  } finally {
    await client.end()
  }
}

afterAll(() => {
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

const waitFor = async (what: string, condition: () => Promise<boolean>, ms = 120_000, every = 200) => {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Support.sleep(every)
  }
}

/** A promise that settles, or gives up after `ms` (a finalizer talking to a crashed server). */
const settle = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.catch(() => undefined), Support.sleep(ms)])

// A window of the relay (`maxWindow`, 4,000 log rows by default) rounded up to whole transactions.
const windowBound = 4_010

/**
 * The old primary's relay either keeps up (`live`: in this process, publishing until the crash) or
 * lags (`lagging`: a relay process frozen with SIGSTOP before the last transaction, so that
 * transaction is on the standby but was never published; SIGKILLed after the crash).
 */
const failover = async (variant: "live" | "lagging") => {
  mkdirSync(state, { recursive: true })
  chmodSync(state, 0o755)
  await primary.up()
  await standby.up()
  try {
    const slot = Support.uniqueName("faults_failover").toLowerCase()
    const topic = Support.uniqueName("faults-failover")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const [version] = await onStandby<{ v: string }>("SELECT current_setting('server_version_num') AS v")
    const lines: Array<string> = []
    const collect = Logger.make((options) => {
      const text = String(Array.isArray(options.message) ? options.message.join(" ") : options.message)
      if (text.startsWith("log relay: ") || text.startsWith("log source: ")) lines.push(`${options.logLevel} ${text}`)
    })
    const run = LogRelay.run().pipe(Effect.provide(Logger.layer([collect], { mergeWithExisting: true })))

    // The relay on the primary, the library's defaults (the layer's setup creates the slot).
    const old = await Support.makeLogStack({ slot, url: primary.url })
    const oldRelay = variant === "live" ? old.runFork(run) : undefined
    const child =
      variant === "lagging"
        ? Support.spawnNode(join(Support.here, "log-relay-process.ts"), {
            FAULTS_LOG_SLOT: slot,
            LOGICAL_DATABASE_URL: primary.url,
            FAULTS_APP_NAME: `${slot}_old`
          })
        : undefined
    if (child !== undefined) await waitFor("the relay process", async () => child.lines.includes("ready"))
    const committed = [...(await Support.enqueueLog(old, topic, 5_000, { keys: 200, chunk: 10 }))]
    await waitFor("5,000 published", async () => (await topicCount(topic)) >= 5_000)
    // 3,000 more in one transaction, and the primary crashes as soon as the standby replayed it:
    // the live relay is still reading or publishing it; the lagging one never reads it.
    child?.process.kill("SIGSTOP")
    committed.push(...(await Support.enqueueLog(old, topic, 3_000, { keys: 200, chunk: 3_000, from: 5_000 })))
    const [{ lsn }] = await old.runPromise(
      Support.logQuery<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn")
    )
    await waitFor(
      "the standby to replay the primary's WAL",
      async () => {
        const [row] = await onStandby<{ done: boolean }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done", [lsn])
        return row?.done === true
      },
      60_000,
      10
    )
    await primary.stop("immediate")
    if (oldRelay !== undefined) await settle(old.runPromise(Fiber.interrupt(oldRelay)), 15_000)
    if (child !== undefined) {
      child.process.kill("SIGKILL")
      await child.exited
    }
    await settle(old.dispose(), 15_000)
    const atCrash = await topicCount(topic)

    await standby.promote()
    const [slots] = await onStandby<{ n: number; recovery: boolean }>(
      "SELECT count(*)::int AS n, pg_is_in_recovery() AS recovery FROM pg_replication_slots WHERE slot_name = $1",
      [slot]
    )
    assert.isFalse(slots!.recovery, "the standby is promoted")
    assert.strictEqual(slots!.n, 0, "PostgreSQL 15 does not copy the logical slot to the standby")

    // The services on the new primary, built with `setup: false` as the runbook's operators run them.
    const stack = await Support.makeLogStack({ slot, url: standbyUrl, setup: false })
    const count = <A extends { count: number }>(metric: Metric.Metric<number, A>) =>
      stack.runPromise(Effect.map(Metric.value(metric), (s) => s.count))
    const missingBefore = await count(PgLogSource.slotMissing)
    const gapBefore = await count(LogRelay.gapEvents)
    const relay = stack.runFork(run)
    try {
      const meanwhile = await Support.enqueueLog(stack, topic, 500, { keys: 200, chunk: 10, from: 8_000 })
      committed.push(...meanwhile)
      await waitFor("two tries without a slot", async () => (await count(PgLogSource.slotMissing)) >= missingBefore + 2)
      const whileMissing = await topicCount(topic)
      // The runbook's step on the new primary: create the slot (the gap is marked on the progress row).
      await stack.runPromise(PgLogSource.ensureSlot({ slot, schema: slot }))
      committed.push(...(await Support.enqueueLog(stack, topic, 500, { keys: 200, chunk: 10, from: 8_500 })))
      await waitFor("9,000 published", async () => {
        const records = await Support.readTopic(Support.sharedBrokers, topic)
        return new Set(records.map((r) => r.eventId)).size >= 9_000
      })
      await Support.sleep(3_000) // a late re-send would land here
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(committed, records)
      const reread = (await count(LogRelay.gapEvents)) - gapBefore
      const announced = lines.find((l) => l.includes("re-reading the events enqueued from"))
      const range = /from (\S+) to (\S+)/.exec(announced ?? "")
      Support.record({
        scenario: `L8 log relay, PostgreSQL 15 fail-over, ${variant === "live" ? "relay keeping up" : "relay lagging"} (primary crashed, standby promoted, ensureSlot)`,
        ...v,
        note: `server ${version?.v}; ${atCrash} of 8000 on the topic at the crash; no slot on the promoted standby, ${whileMissing} on the topic while the relay waited; ensureSlot, then ${reread} events read back from the event table (range ${range?.[1]} to ${range?.[2]}, logged at ERROR); defaults`
      })
      assert.strictEqual(whileMissing, atCrash, "nothing is published while the new primary has no slot")
      if (variant === "lagging") assert.strictEqual(atCrash, 5_000, "the last transaction was never published")
      assert.isDefined(announced, lines.join("\n"))
      assert.isTrue(announced!.startsWith("Error "))
      assert.isAtLeast(reread, 500, "the events committed while there was no slot come from the table")
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.isAtMost(v.duplicatesDelivered, windowBound)
    } finally {
      await stack.runPromise(Fiber.interrupt(relay))
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  } finally {
    await standby.down()
    await primary.down()
  }
}

describe("the log relay across a PostgreSQL 15 fail-over (L8)", () => {
  it(
    "primary crashed while the relay kept up, standby promoted, slot re-created by the runbook: 0 lost, duplicates within a window, order kept",
    () => failover("live"),
    400_000
  )

  it(
    "primary crashed while the relay lagged (its last transaction unpublished), standby promoted, slot re-created by the runbook: 0 lost, order kept",
    () => failover("lagging"),
    400_000
  )
})
