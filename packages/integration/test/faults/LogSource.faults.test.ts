// The log engine's source under attack and neglect, on the private logical PostgreSQL
// (LOGICAL_DATABASE_URL) and the real Kafka, with the library's defaults (PgLogOutbox.layer,
// LogRelay.run()): roles without grants trying to publish, malformed rows from a role that may
// write, a slot dropped while the relay is down.
import { randomUUID } from "node:crypto"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import { LogSource } from "@effect-outbox/core/LogSource"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as LogSourceSuite from "@effect-outbox/testing/LogSourceSuite"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import pg from "pg"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const roleUrl = (role: string) => {
  const url = new URL(Support.logicalDatabaseUrl)
  url.username = role
  url.password = ""
  return url.toString()
}

/** Runs `statements` as a fresh login role; the SQLSTATE of each, or "ok". */
const asRole = async (role: string, statements: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>) => {
  const client = new pg.Client({ connectionString: roleUrl(role) })
  await client.connect()
  const out: Array<string> = []
  try {
    for (const [text, params] of statements) {
      out.push(
        await client.query(text, params as Array<unknown>).then(
          () => "ok",
          (error: { code?: string }) => error.code ?? "error"
        )
      )
    }
  } finally {
    await client.end()
  }
  return out
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

const waitFor = async (what: string, check: () => Promise<boolean>, ms = 60_000) => {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Support.sleep(200)
  }
}

/** A forged event as the old message source carried it: a valid record for `topic`. */
const forged = (topic: string, overrides: Partial<LogRecord.LogMessage> = {}) => {
  const id = LogSourceSuite.eventId()
  return {
    id,
    bytes: Buffer.from(
      LogRecord.encode({
        id,
        topic,
        key: "forged",
        partition: null,
        headers: { "event-id": id },
        payload: new TextEncoder().encode('{"forged":true}'),
        createdAt: Date.now(),
        ...overrides
      })
    )
  }
}

const withStack = async (
  name: string,
  body: (ctx: { stack: Support.LogStack; slot: string; topic: string }) => Promise<void>
) => {
  const slot = Support.uniqueName(name).toLowerCase()
  const topic = Support.uniqueName(name.replaceAll("_", "-"))
  await Support.createTopics(Support.sharedBrokers, [topic])
  const stack = await Support.makeLogStack({ slot })
  const roles: Array<string> = []
  try {
    await body({ stack, slot, topic })
  } finally {
    await Support.dropLogSlot(stack, slot)
    const owned = await stack.runPromise(
      Support.logQuery<{ rolname: string }>(`SELECT rolname FROM pg_roles WHERE rolname LIKE $1`, [`${slot}%`])
    )
    roles.push(...owned.map((r) => r.rolname))
    for (const role of roles) await stack.runPromise(Support.logQuery(`DROP ROLE IF EXISTS "${role}"`)).catch(() => 0)
    await stack.dispose()
    await Support.deleteTopics(Support.sharedBrokers, [topic])
  }
}

describe("the log source: who can publish", () => {
  it("a login role without grants cannot publish: a raw INSERT is refused, logical messages are ignored", () =>
    withStack("faults_forge", async ({ stack, slot, topic }) => {
      const relay = stack.runFork(LogRelay.run())
      const committed = [...(await Support.enqueueLog(stack, topic, 100, { keys: 10, chunk: 10 }))]
      const role = `${slot}_forger`
      await stack.runPromise(Support.logQuery(`CREATE ROLE "${role}" LOGIN`))
      const table = `"${slot}".outbox_log_event`
      const a = forged(topic)
      const refusedNoSchema = await asRole(role, [
        [`INSERT INTO ${table} (id, record) VALUES ($1, $2)`, [a.id, a.bytes]]
      ])
      await stack.runPromise(Support.logQuery(`GRANT USAGE ON SCHEMA "${slot}" TO "${role}"`))
      const refusedNoTable = await asRole(role, [
        [`INSERT INTO ${table} (id, record) VALUES ($1, $2)`, [a.id, a.bytes]]
      ])
      // The old source's attack: transactional and not, under the old default prefix and the
      // slot's name, a valid record, garbage, and a record whose key is a number.
      const messages = [forged(topic), forged(topic), forged(topic)]
      const numericKey = Buffer.from(
        JSON.stringify({ id: randomUUID(), topic, key: 42, partition: null, headers: {}, createdAt: 1 })
      )
      const header = Buffer.alloc(5)
      header[0] = 1
      header.writeUInt32BE(numericKey.length, 1)
      const emitted = await asRole(role, [
        [`SELECT pg_logical_emit_message(true, $1, $2::bytea)`, [`effect-outbox/${slot}`, messages[0]!.bytes]],
        [`SELECT pg_logical_emit_message(false, $1, $2::bytea)`, [`effect-outbox/${slot}`, messages[1]!.bytes]],
        [`SELECT pg_logical_emit_message(true, $1, $2::bytea)`, [slot, messages[2]!.bytes]],
        [`SELECT pg_logical_emit_message(true, $1, $2::bytea)`, [`effect-outbox/${slot}`, Buffer.from("garbage")]],
        [
          `SELECT pg_logical_emit_message(true, $1, $2::bytea)`,
          [`effect-outbox/${slot}`, Buffer.concat([header, numericKey])]
        ]
      ])
      committed.push(...(await Support.enqueueLog(stack, topic, 100, { keys: 10, chunk: 10, from: 100 })))
      await waitFor("200 records", async () => (await topicCount(topic)) >= 200)
      await Support.sleep(2_000) // a forged record would land here
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const forgedIds = new Set<string>([a.id, ...messages.map((m) => m.id)])
      const forgedOnTopic = records.filter((r) => forgedIds.has(r.eventId ?? "") || r.key === "forged").length
      const running = relay.pollUnsafe() === undefined
      const [active] = await stack.runPromise(
        Support.logQuery<{ active: boolean }>(`SELECT active FROM pg_replication_slots WHERE slot_name = $1`, [slot])
      )
      await Effect.runPromise(Fiber.interrupt(relay))
      const v = Support.verdict(committed, records)
      Support.record({
        scenario: "S1 a role without grants publishes: raw INSERT, logical messages",
        ...v,
        note: `INSERT refused: ${refusedNoSchema[0]} without schema usage, ${refusedNoTable[0]} with it; 5 logical messages (old prefix, valid, garbage, numeric key) written and ignored; ${forgedOnTopic} forged on the topic (${records.length} records); relay running: ${running}`
      })
      assert.deepStrictEqual([refusedNoSchema, refusedNoTable], [["42501"], ["42501"]])
      assert.deepStrictEqual(emitted, ["ok", "ok", "ok", "ok", "ok"], "the messages are written: nothing stops them")
      assert.strictEqual(forgedOnTopic, 0)
      assert.strictEqual(records.length, 200)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
      assert.isTrue(running, "the relay is still running")
      assert.isTrue(active?.active === true, "and still holds the slot")
    }))

  it("malformed rows from a role with INSERT are read flagged invalid, between the events, and never fail the read", () =>
    withStack("faults_malformed", async ({ stack, slot, topic }) => {
      const writer = `${slot}_writer`
      await stack.runPromise(Support.logQuery(`CREATE ROLE "${writer}" LOGIN`))
      await stack.runPromise(Support.logQuery(`GRANT USAGE ON SCHEMA "${slot}" TO "${writer}"`))
      await stack.runPromise(Support.logQuery(`GRANT INSERT ON "${slot}".outbox_log_event TO "${writer}"`))
      const before = await Support.enqueueLog(stack, topic, 20, { keys: 5, chunk: 10 })
      const table = `"${slot}".outbox_log_event`
      const rows: ReadonlyArray<readonly [EventId, Buffer]> = [
        [LogSourceSuite.eventId(), Buffer.from("garbage")],
        ...[
          forged(topic, { topic: "no such/topic" }),
          forged(topic, { partition: 5000 }),
          forged(topic, { headers: { n: 1 as unknown as string } }),
          forged(topic, { key: 42 as unknown as string })
        ].map((f) => [f.id, f.bytes] as const)
      ]
      const inserted = await asRole(writer, [
        ["BEGIN", []],
        ...rows.map(([id, bytes]) => [`INSERT INTO ${table} (id, record) VALUES ($1, $2)`, [id, bytes]] as const),
        ["COMMIT", []]
      ])
      const after = await Support.enqueueLog(stack, topic, 20, { keys: 5, chunk: 10, from: 20 })
      const window = await stack.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* Effect.flatMap(Effect.service(LogSource), (source) => source.acquire)
            if (Option.isNone(lease)) return yield* Effect.die("lease held")
            return yield* LogSourceSuite.readAtLeast(lease.value, 45, 10_000)
          })
        )
      )
      const invalid = window.entries.filter((e) => e.invalid !== undefined)
      const valid = window.entries.filter((e) => e.invalid === undefined)
      Support.record({
        scenario: "S2 malformed rows from a role with INSERT",
        events: 40,
        lost: 40 - valid.length,
        duplicatesDelivered: 0,
        duplicateEffects: 0,
        orderViolations: 0,
        note: `${invalid.length} of 5 flagged invalid (${invalid.map((e) => e.invalid!.split(" ").slice(0, 3).join(" ")).join("; ")}); read at the source, the relay's quarantine not exercised here`
      })
      assert.deepStrictEqual(inserted, ["ok", "ok", "ok", "ok", "ok", "ok", "ok"])
      assert.deepStrictEqual(
        valid.map((e) => e.id),
        [...before, ...after].map((c) => c.id)
      )
      assert.deepStrictEqual(
        invalid.map((e) => e.id),
        rows.map(([id]) => id)
      )
      assert.match(invalid[0]!.invalid!, /version 103|shorter/)
      assert.match(invalid[1]!.invalid!, /topic/)
      assert.match(invalid[2]!.invalid!, /above the maximum/)
      assert.match(invalid[3]!.invalid!, /header "n"/)
      assert.match(invalid[4]!.invalid!, /key is a number/)
      assert.deepStrictEqual([...invalid[0]!.payload], [...Buffer.from("garbage")])
    }))
})

/**
 * 10 events published, relay stopped, slot dropped, 20 events committed; then either the relay
 * started and left waiting for the slot until `ensureSlot` re-creates it ("waiting"), or the setup
 * step re-creates it while the relay is down and the relay starts after ("setup"), or an operator
 * creates it by hand (`pg_create_logical_replication_slot`, no gap mark) and the relay starts
 * after ("hand"); 10 more.
 */
const lostSlot = (variant: "waiting" | "setup" | "hand") =>
  withStack(`faults_noslot_${variant}`, async ({ stack, slot, topic }) => {
    const lines: Array<string> = []
    const collect = Logger.make((options) => {
      const text = String(Array.isArray(options.message) ? options.message.join(" ") : options.message)
      if (text.startsWith("log relay: ") || text.startsWith("log source: ")) lines.push(`${options.logLevel} ${text}`)
    })
    const run = LogRelay.run().pipe(Effect.provide(Logger.layer([collect], { mergeWithExisting: true })))
    const count = <A extends { count: number }>(metric: Metric.Metric<number, A>) =>
      stack.runPromise(Effect.map(Metric.value(metric), (state) => state.count))
    let relay = stack.runFork(run)
    const first = await Support.enqueueLog(stack, topic, 10, { keys: 5, chunk: 5 })
    await waitFor("10 records", async () => (await topicCount(topic)) >= 10)
    await Effect.runPromise(Fiber.interrupt(relay))
    await waitFor("the slot released", async () => {
      const rows = await stack.runPromise(
        Support.logQuery<{ active: boolean }>(`SELECT active FROM pg_replication_slots WHERE slot_name = $1`, [slot])
      )
      return rows[0]?.active === false
    })
    await stack.runPromise(Support.logQuery(`SELECT pg_drop_replication_slot($1)`, [slot]))
    const gap = await Support.enqueueLog(stack, topic, 20, { keys: 5, chunk: 5, from: 10 })
    const missingBefore = await count(PgLogSource.slotMissing)
    const gapBefore = await count(LogRelay.gapEvents)
    if (variant === "waiting") {
      relay = stack.runFork(run)
      // No slot: the relay publishes nothing and tries again, each try counted.
      await waitFor("two tries without a slot", async () => (await count(PgLogSource.slotMissing)) >= missingBefore + 2)
    }
    const whileMissing = await topicCount(topic)
    const byHand = Support.logQuery(`SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput')`, [
      slot
    ])
    await stack.runPromise<unknown, unknown>(
      variant === "waiting"
        ? PgLogSource.ensureSlot({ slot, schema: slot })
        : variant === "setup"
          ? PgLogOutbox.setup({ slot, schema: slot })
          : byHand
    )
    if (variant !== "waiting") relay = stack.runFork(run)
    const last = await Support.enqueueLog(stack, topic, 10, { keys: 5, chunk: 5, from: 30 })
    await waitFor("40 records", async () => (await topicCount(topic)) >= 40)
    await Support.sleep(2_000) // a duplicate would land meanwhile
    await Effect.runPromise(Fiber.interrupt(relay))
    const missing = (await count(PgLogSource.slotMissing)) - missingBefore
    const reread = (await count(LogRelay.gapEvents)) - gapBefore
    const [mark] = await stack.runPromise(
      Support.logQuery<{ open: boolean }>(
        `SELECT slot_created IS NOT NULL AS open FROM "${slot}".outbox_log_progress WHERE slot = $1`,
        [slot]
      )
    )
    const records = await Support.readTopic(Support.sharedBrokers, topic)
    const v = Support.verdict([...first, ...gap, ...last], records)
    const announced = lines.find((l) => l.includes("re-reading the events enqueued from"))
    const range = /from (\S+) to (\S+)/.exec(announced ?? "")
    const assertGap = () => {
      assert.isDefined(announced, lines.join("\n"))
      assert.isTrue(announced!.startsWith("Error "))
      // The range covers the gap: from before the first unpublished event's enqueue.
      assert.isAtMost(Date.parse(range![1]!), Number.parseInt(gap[0]!.id.replaceAll("-", "").slice(0, 12), 16))
      assert.isAtLeast(reread, 20)
      assert.isFalse(mark?.open, "the gap is closed once published")
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
    }
    const how = {
      waiting: `relay waited (${missing} tries counted in outbox_log_slot_missing_total, ${whileMissing} on the topic); ensureSlot re-created the slot`,
      setup: "PgLogOutbox.setup re-created the slot, relay started",
      hand: "the slot created by hand (pg_create_logical_replication_slot, no gap mark), found ahead of the relay's progress, relay started"
    }[variant]
    const title = {
      waiting: "relay waits, ensureSlot",
      setup: "setup, then relay",
      hand: "created by hand, then relay"
    }
    Support.record({
      scenario: `S3 slot dropped while the relay is down (${title[variant]})`,
      ...v,
      note: `${how}; ${reread} events read back from the event table (range ${range?.[1]} to ${range?.[2]}, logged at ERROR), the missing ones published before the new slot's`
    })
    assert.strictEqual(whileMissing, 10, "nothing is published while the slot is missing")
    if (variant === "hand") assert.isTrue(announced?.includes("not created by the setup step"), announced)
    if (variant !== "waiting") return assertGap()
    assert.isAtLeast(missing, 2)
    assert.isTrue(
      lines.some((l) => l.startsWith("Error log source: replication slot") && /does not exist.*ensureSlot/.test(l)),
      lines.join("\n")
    )
    assertGap()
  })

describe("the log source: a lost slot", () => {
  it("a slot dropped while the relay is down, the relay waiting: once ensureSlot re-creates the slot the relay publishes the gap from the event table first: 0 lost", () =>
    lostSlot("waiting"))

  it("a slot dropped while the relay is down, re-created by the setup step before the relay starts: the gap is published from the event table first: 0 lost", () =>
    lostSlot("setup"))

  it("a slot dropped while the relay is down and created by hand (no gap mark): found ahead of the relay's own progress, the gap is published from the event table first: 0 lost", () =>
    lostSlot("hand"))
})
