/**
 * The database answers read-only for 30 s, as a primary does while a fail-over demotes it
 * (`ALTER SYSTEM SET default_transaction_read_only = on` + reload on a private cluster: every
 * open session's next transaction is read-only, writes fail with SQLSTATE 25006):
 * - a consumer on library defaults, records streaming in: its handler's writes and its
 *   bookkeeping fail, the partition waits and retries outside the attempt budget; nothing is
 *   dead-lettered, nothing lost, every effect once, per-key order kept;
 * - the claim relay, events enqueued before and after: claims fail, the relay pauses and resumes
 *   without counting an attempt on any row; every committed event published once, in order.
 * The table printed at the end has a row per scenario.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

const readOnlySeconds = Number(process.env.FAULTS_READ_ONLY_SECONDS ?? 30)
const pg = Support.privatePostgres()

afterAll(async () => {
  console.log(`\nread-only database fault tests\n${Support.table()}\n`)
  await pg.down()
  rmSync(pg.state, { recursive: true, force: true })
})

// Each -c is its own transaction on one session: the SET lets the ALTER SYSTEM through while the
// server is read-only by default.
const setReadOnly = (on: boolean) =>
  execFileSync(
    "psql",
    [
      pg.url,
      "-Atc",
      "SET default_transaction_read_only = off",
      "-c",
      `ALTER SYSTEM SET default_transaction_read_only = ${on ? "on" : "off"}`,
      "-c",
      "SELECT pg_reload_conf()"
    ],
    { stdio: ["ignore", "pipe", "pipe"] }
  )

const infrastructureRetries = (stack: Support.Stack) =>
  stack.runPromise(Effect.map(Metric.value(Telemetry.consumerInfrastructureRetriesTotal), (state) => state.count))

interface Produced {
  readonly id: string
  readonly key: string
  readonly index: number
}

/** Publishes `perTick` keyed records every 250 ms until stopped; only acknowledged ones count. */
const streamRecords = (stack: Support.Stack, topic: string, options: { keys: number; perTick: number }) => {
  const produced: Array<Produced> = []
  let running = true
  let index = 0
  const loop = (async () => {
    while (running) {
      const started = Date.now()
      const batch = await stack.runPromise(
        Effect.forEach(Array.from({ length: options.perTick }), () =>
          Effect.map(makeEventId, (id) => {
            const n = index++
            const key = `k${n % options.keys}`
            const request: PublishRequest = {
              id,
              topic,
              key,
              partition: null,
              headers: { "event-id": id },
              payload: Support.payloadOf({ index: n, pad: "x".repeat(100) })
            }
            return { request, produced: { id, key, index: n } }
          })
        )
      )
      const outcomes = await stack.runPromise(Publisher.use((p) => p.publish(batch.map((b) => b.request))))
      outcomes.forEach((outcome, i) => {
        if (outcome._tag === "Success") produced.push(batch[i]!.produced)
      })
      await Support.sleep(Math.max(0, 250 - (Date.now() - started)))
    }
  })()
  return {
    produced,
    stop: async () => {
      running = false
      await loop
    }
  }
}

/** Lost, duplicate effects and keys whose first effects are out of production order. */
const effectsVerdict = async (stack: Support.Stack, schema: string, produced: ReadonlyArray<Produced>) => {
  const effects = await Support.query<{ event_id: string }>(
    stack,
    `SELECT event_id FROM "${schema}".effects ORDER BY n`
  )
  const byId = new Map(produced.map((p) => [p.id, p]))
  const seen = new Set<string>()
  const last = new Map<string, number>()
  const violating = new Set<string>()
  let duplicateEffects = 0
  for (const { event_id } of effects) {
    if (seen.has(event_id)) {
      duplicateEffects++
      continue
    }
    seen.add(event_id)
    const p = byId.get(event_id)
    if (p === undefined) continue
    if ((last.get(p.key) ?? -1) > p.index) violating.add(p.key)
    last.set(p.key, Math.max(p.index, last.get(p.key) ?? -1))
  }
  return {
    events: produced.length,
    lost: produced.filter((p) => !seen.has(p.id)).length,
    duplicatesDelivered: 0,
    duplicateEffects,
    orderViolations: violating.size
  }
}

const until = async (done: () => Promise<boolean>, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!(await done()) && Date.now() < deadline) await Support.sleep(500)
}

describe("the database answers read-only for 30 s (a fail-over)", () => {
  it("a consumer on defaults: nothing dead-lettered, nothing lost, every effect once", async () => {
    await pg.up()
    const schema = Support.uniqueName("faults_ro_c")
    const topic = Support.uniqueName("faults-ro-c")
    const dlt = `${topic}.DLT`
    await Support.createTopics(Support.sharedBrokers, [topic, dlt])
    const stack = await Support.makeStack({ schema, databaseUrl: pg.url })
    try {
      await Support.createEffects(stack, schema)
      const retriesBefore = await infrastructureRetries(stack)
      // Library defaults: only what a consumer must say.
      const consumer = await Support.startConsumer(stack, {
        groupId: `${schema}-group`,
        topics: [topic],
        handler: (m) => Support.insertEffect(schema, m.eventId!, m.record)
      })
      const stream = streamRecords(stack, topic, { keys: 50, perTick: 20 })
      await Support.sleep(8_000)
      setReadOnly(true)
      // Counted once the reload has reached every session: a transaction begun before it may
      // still commit, which is not a write while read-only.
      await Support.sleep(1_000)
      const before = (await Support.effectCounts(stack, schema)).distinct
      await Support.sleep(readOnlySeconds * 1000 - 1_000)
      const during = (await Support.effectCounts(stack, schema)).distinct
      setReadOnly(false)
      const writableAt = Date.now()
      await Support.sleep(5_000)
      await stream.stop()
      await until(async () => (await Support.effectCounts(stack, schema)).distinct >= stream.produced.length, 120_000)
      const caughtUp = ((Date.now() - writableAt) / 1000).toFixed(1)
      const retries = (await infrastructureRetries(stack)) - retriesBefore
      assert.strictEqual(consumer.failure(), undefined)
      await consumer.stop()

      const deadLettered = (await Support.readTopic(Support.sharedBrokers, dlt)).length
      const v = await effectsVerdict(stack, schema, stream.produced)
      Support.record({
        scenario: `database read-only ${readOnlySeconds} s, consumer on defaults`,
        ...v,
        deadLettered,
        note:
          `${before} processed before; ${during - before} effects committed while read-only; ${retries} infrastructure ` +
          `retries, none counted as attempts; every effect ${caughtUp} s after writes came back (streaming went on 5 s)`
      })
      assert.isAbove(before, 0)
      assert.strictEqual(during, before, "no write commits while the database is read-only")
      assert.isAbove(retries, 0)
      assert.strictEqual(deadLettered, 0)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicateEffects, 0)
      assert.strictEqual(v.orderViolations, 0)
    } finally {
      setReadOnly(false)
      await Support.dropSchema(stack, schema).catch(() => undefined)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, dlt])
    }
  }, 300_000)

  it("the claim relay pauses and resumes without counting attempts: every event published once, in order", async () => {
    await pg.up()
    const schema = Support.uniqueName("faults_ro_r")
    const topic = Support.uniqueName("faults-ro-r")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeStack({ schema, databaseUrl: pg.url })
    const t = await Support.tables(stack)
    const committed: Array<{ readonly id: string; readonly key: string }> = []
    let refused = 0
    const otherErrors: Array<string> = []
    let index = 0
    let enqueueing = true
    // The application writes 10 events every 100 ms; while read-only its transactions fail.
    const writer = (async () => {
      while (enqueueing) {
        const drafts = Array.from({ length: 10 }, () => {
          const n = index++
          return { topic, key: `k${n % 40}`, payload: Support.payloadOf({ index: n, pad: "x".repeat(100) }) }
        })
        await stack
          .runPromise(Outbox.withTransaction(Outbox.enqueue(drafts)))
          .then((ids) => {
            for (const [i, id] of ids.entries()) committed.push({ id, key: drafts[i]!.key })
          })
          .catch((error: unknown) => {
            if (/read-only transaction/.test(String(error))) refused++
            else otherErrors.push(String(error))
          })
        await Support.sleep(100)
      }
    })()
    const stopRelay = await Support.startRelay(stack)
    try {
      await Support.sleep(5_000)
      setReadOnly(true)
      const readOnlyAt = Date.now()
      await Support.sleep(readOnlySeconds * 1000)
      setReadOnly(false)
      const writableAt = Date.now()
      await Support.sleep(5_000)
      enqueueing = false
      await writer
      const unpublished = async () =>
        (
          await Support.query<{ n: number }>(
            stack,
            `SELECT count(*)::int AS n FROM ${t.message} WHERE status <> 'PUBLISHED'`
          )
        )[0]!.n
      await until(async () => (await unpublished()) === 0, 120_000)
      const drained = ((Date.now() - writableAt) / 1000).toFixed(1)
      const rows = (
        await Support.query<{ failures: number; max_attempts: number; total: number }>(
          stack,
          `SELECT count(*) FILTER (WHERE status = 'FAILURE')::int AS failures,
                  coalesce(max(attempts), 0)::int AS max_attempts, count(*)::int AS total FROM ${t.message}`
        )
      )[0]!
      const v = Support.verdict(committed, await Support.readTopic(Support.sharedBrokers, topic))
      const { lostIds: _, ...counts } = v
      Support.record({
        scenario: `database read-only ${readOnlySeconds} s, claim relay`,
        ...counts,
        failureRows: rows.failures,
        note:
          `read-only ${((writableAt - readOnlyAt) / 1000).toFixed(1)} s; ${refused} application transactions refused ` +
          `meanwhile (25006); max attempts on a row ${rows.max_attempts}; drained ${drained} s after writes came back`
      })
      assert.isAbove(refused, 0, "the database was read-only")
      assert.deepStrictEqual(otherErrors.slice(0, 3), [], "the only refusals are the read-only ones")
      assert.strictEqual(rows.total, committed.length)
      assert.strictEqual(await unpublished(), 0)
      assert.strictEqual(rows.failures, 0)
      assert.strictEqual(rows.max_attempts, 0, "an outage counts no attempt")
      assert.strictEqual(v.lost, 0, JSON.stringify(v.lostIds))
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
    } finally {
      enqueueing = false
      await writer
      setReadOnly(false)
      await stopRelay()
      await Support.dropSchema(stack, schema).catch(() => undefined)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  }, 300_000)
})
