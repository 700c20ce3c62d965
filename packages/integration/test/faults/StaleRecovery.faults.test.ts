// Stale recovery on the real services: a relay died holding 300
// leases; 150 of its rows were created three days before their claim, on a topic with a long
// history. Two live relays, each with stale recovery at its defaults (but a short interval), must
// recover every row within 3 rounds (pages of the default 100), judge each row once (one
// recovery transition per row in `<prefix>transition`), and log exactly the transitions that
// applied.

import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import * as Transition from "@effect-outbox/core/Transition"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const ROWS = 300
const OLD_ROWS = 150
const ROWS_PER_KEY = 3
const HISTORY = Number(process.env.FAULTS_STALE_HISTORY ?? 500_000)
const DEAD_OWNER = "dead-relay"

// A stack like Support.stackLayer, recording transitions, with the stale-recovery log lines
// collected (Info, this module's lines only).
const stackWith = (schema: string, lines: Array<string>) => {
  const client = PgClient.layer({
    url: Redacted.make(Support.databaseUrl),
    maxConnections: 4,
    applicationName: "effect-outbox-faults-stale"
  })
  const pg = PgOutbox.layer({ schema, store: { recordTransitions: true } }).pipe(Layer.provideMerge(client))
  const broker = KafkaOutbox.layer(
    { brokers: Support.sharedBrokers, clientId: "faults-stale", connectionTimeout: 3_000, requestTimeout: 10_000 },
    { publisher: { publishTimeoutMillis: 8_000 } }
  )
  const collect = Logger.make((options) => {
    const text = String(Array.isArray(options.message) ? options.message.join(" ") : options.message)
    if (text.startsWith("outbox stale recovery:")) lines.push(text)
  })
  const logging = Layer.mergeAll(
    Logger.layer([collect], { mergeWithExisting: false }),
    Layer.succeed(References.MinimumLogLevel)("Info")
  )
  return ManagedRuntime.make(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
      Layer.provideMerge(Layer.merge(pg, broker)),
      Layer.provideMerge(logging)
    )
  )
}

// What the rounds logged: "N expired leases, F found on the broker, R requeued (...), X failed".
const parse = (line: string) => {
  const number = (pattern: RegExp) => Number(pattern.exec(line)?.[1] ?? Number.NaN)
  return {
    stale: number(/: (\d+) expired leases/),
    found: number(/, (\d+) found on the broker/),
    requeued: number(/, (\d+) requeued/),
    failed: number(/, (\d+) failed/)
  }
}

describe("stale recovery: two relays, 300 expired leases, half on rows created days before their claim", () => {
  it("recovers every row within 3 rounds, judges each once, logs what applied", { timeout: 240_000 }, async () => {
    const schema = Support.uniqueName("faults_stale")
    const topic = Support.uniqueName("faults-stale")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const lines: Array<string> = []
    const setup = stackWith(schema, lines)
    await setup.runPromise(Effect.void)
    const t = await setup.runPromise(Effect.service(PgTables.PgTables))
    const query = <A extends object>(text: string) =>
      setup.runPromise(Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql.unsafe<A>(text)))
    const stops: Array<() => Promise<void>> = []
    try {
      // 1. The rows, three per key in a row (so pages of 100 cut keys), the first 150 created
      //    three days ago (a backlog, an operator's requeue).
      const drafts: Array<OutboxDraft> = Array.from({ length: ROWS }, (_, i) => ({
        topic,
        key: `k${Math.floor(i / ROWS_PER_KEY)}`,
        payload: Support.payloadOf({ index: i, pad: "x".repeat(100) })
      }))
      const ids = await setup.runPromise(Outbox.withTransaction(Outbox.enqueue(drafts)))
      await query(
        `UPDATE ${t.message} SET created_at = now() - interval '3 days', updated_at = now() - interval '3 days'
          WHERE seq IN (SELECT seq FROM ${t.message} ORDER BY seq LIMIT ${OLD_ROWS})`
      )

      // 2. The topic's long history: records written over the three days since those rows were
      //    created, up to an hour before the claim (their timestamps say so). A probe from the
      //    row's creation reads all of it; one from the claim time reads none of it.
      const producer = Support.kafka().producer()
      await producer.connect()
      const historyStarted = Date.now()
      const from = historyStarted - 3 * 24 * 3_600_000 + 60_000
      const step = Math.floor((3 * 24 * 3_600_000 - 2 * 3_600_000) / HISTORY)
      for (let i = 0; i < HISTORY; i += 2_000) {
        await producer.send({
          topic,
          messages: Array.from({ length: Math.min(2_000, HISTORY - i) }, (_, j) => ({
            key: `history-${(i + j) % 97}`,
            value: `history ${i + j}`,
            timestamp: String(from + (i + j) * step)
          }))
        })
      }
      await producer.disconnect()
      const historyMillis = Date.now() - historyStarted

      // 3. A relay claims all 300, gets a per-key prefix onto the broker, and dies.
      const claimed = await setup.runPromise(
        Transition.claim({ owner: DEAD_OWNER, limit: ROWS, maxPerKey: ROWS, leaseMillis: 1_000 })
      )
      assert.strictEqual(claimed.length, ROWS)
      const byId = new Map(claimed.map((row) => [row.id, row]))
      const sent = ids.filter((_, i) => i % ROWS_PER_KEY < Math.floor(i / ROWS_PER_KEY) % (ROWS_PER_KEY + 1))
      const outcomes = await setup.runPromise(
        Publisher.use((publisher) =>
          publisher.publish(
            sent.map((id) => {
              const row = byId.get(id)!
              return { id, topic, key: row.key, partition: null, headers: row.headers, payload: row.payload }
            })
          )
        )
      )
      assert.isTrue(outcomes.every((o) => o._tag === "Success"))
      await Support.sleep(1_500) // the leases expire

      // 4. Two live relays, each with stale recovery: library defaults except a short interval.
      const started = Date.now()
      const relays = [stackWith(schema, lines), stackWith(schema, lines)]
      for (const relay of relays) {
        const scope = await relay.runPromise(Scope.make())
        await relay.runPromise(
          Effect.gen(function* () {
            yield* StaleRecovery.start({ interval: Duration.seconds(2) })
            yield* Relay.start({ pollInterval: Duration.millis(200) })
          }).pipe(Scope.provide(scope))
        )
        stops.push(async () => {
          await relay.runPromise(Scope.close(scope, Exit.void))
          await relay.dispose()
        })
      }
      const unfinished = async () =>
        (await query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t.message} WHERE status <> 'PUBLISHED'`))[0]!.n
      while ((await unfinished()) > 0) {
        if (Date.now() - started > 120_000) {
          const statuses = await query<{ status: string; owner: string | null; n: number }>(
            `SELECT status, lease_owner AS owner, count(*)::int AS n FROM ${t.message} GROUP BY 1, 2`
          )
          throw new Error(
            `${await unfinished()} rows not PUBLISHED after 120 s: ${JSON.stringify(statuses)}\n${lines.join("\n")}`
          )
        }
        await Support.sleep(250)
      }
      const drainMillis = Date.now() - started
      for (const stop of stops.splice(0)) await stop()

      // Each row judged once: exactly one transition out of the dead relay's lease.
      const judged = await query<{ event_id: string; to_status: string }>(
        `SELECT event_id::text, to_status FROM ${t.transition}
          WHERE from_status = 'DISPATCHING' AND lease_owner = '${DEAD_OWNER}'`
      )
      const perRow = new Map<string, number>()
      for (const j of judged) perRow.set(j.event_id, (perRow.get(j.event_id) ?? 0) + 1)
      assert.strictEqual(perRow.size, ROWS, "every row judged")
      assert.isTrue(
        [...perRow.values()].every((n) => n === 1),
        "no row judged twice"
      )
      const foundApplied = judged.filter((j) => j.to_status === "PUBLISHED").length
      const requeuedApplied = judged.filter((j) => j.to_status === "PENDING").length
      assert.strictEqual(foundApplied, sent.length, "the rows the dead relay sent are found, no duplicate")
      assert.strictEqual(requeuedApplied, ROWS - sent.length)

      // Within 3 rounds, and the logs count what applied.
      const rounds = lines.filter((line) => / [1-9]\d* expired leases/.test(line)).map(parse)
      assert.isAtMost(rounds.length, 3, lines.join("\n"))
      assert.strictEqual(
        rounds.reduce((n, r) => n + r.stale, 0),
        ROWS,
        lines.join("\n")
      )
      assert.strictEqual(
        rounds.reduce((n, r) => n + r.found, 0),
        foundApplied
      )
      assert.strictEqual(
        rounds.reduce((n, r) => n + r.requeued, 0),
        requeuedApplied
      )
      assert.strictEqual(
        rounds.reduce((n, r) => n + r.failed, 0),
        0
      )

      const records = (await Support.readTopic(Support.sharedBrokers, topic)).filter((r) => r.eventId !== undefined)
      const committed = ids.map((id, i) => ({ id, key: drafts[i]!.key ?? null }))
      const v = Support.verdict(committed, records)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      Support.record({
        scenario: "stale recovery: 2 relays, 300 leases",
        ...v,
        // Recovery never fails a row (the rounds' failed count is asserted 0 above).
        failureRows: rounds.reduce((n, r) => n + r.failed, 0),
        note:
          `${OLD_ROWS} rows created 3 days before claim, ${HISTORY} history records (${historyMillis} ms); ` +
          `${rounds.length} rounds (${rounds.map((r) => r.stale).join("+")} judged), ` +
          `${foundApplied} found + ${requeuedApplied} requeued = logged; all PUBLISHED in ${drainMillis} ms`
      })
    } finally {
      for (const stop of stops) await stop().catch(() => undefined)
      await query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined)
      await setup.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
