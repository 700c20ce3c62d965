// A waiting key's younger rows are set aside once and come back when its head has gone: a
// second back-off round does not write them again, and relays that send heads back at random
// while rows keep arriving leave no row set aside and publish every key in order.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { BEHIND_ITS_HEAD, type EventId, type NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import pg from "pg"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { databaseUrl, freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const RELAYS = 6

const StoreLive = PgOutboxStore.layer().pipe(
  Layer.provideMerge(freshTables()),
  Layer.provideMerge(pgClient(RELAYS + 2))
)

const draft = (key: string, at: number): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "t",
  key,
  partition: null,
  headers: {},
  payload: new Uint8Array(300),
  status: "PENDING",
  availableAt: at,
  createdAt: at
})

/** The row versions of a key's rows (`xmin` changes with every write) and their `available_at`. */
const versionsOf = (key: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    return yield* sql.unsafe<{ seq: string; version: string; available_at: Date }>(
      `SELECT m.seq::text, m.xmin::text AS version, m.available_at FROM ${t.message} m WHERE m.key = $1 ORDER BY m.seq`,
      [key]
    ).withoutTransform
  })

const waitingKeys = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  return yield* sql.unsafe<{ key: string; head_due: Date }>(`SELECT key, head_due FROM ${t.waitingKey} ORDER BY key`)
    .withoutTransform
})

describe("PgOutboxStore: the rows of a waiting key", () => {
  it.live("are set aside at the head's first back-off and not written again by its later rounds", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const rows = [draft("a", T0), ...Array.from({ length: 50 }, () => draft("a", T0))]
      yield* store.insert(rows)
      const backOff = (now: number) =>
        Effect.gen(function* () {
          const [head] = yield* store.claim({ owner: "relay", limit: 1, maxPerKey: 1, leaseMillis: 30_000, now })
          assert.strictEqual(head?.id, rows[0]!.id)
          const [outcome] = yield* store.transition([
            {
              id: head!.id,
              from: ["DISPATCHING"],
              to: "PENDING",
              leaseOwner: "relay",
              patch: { availableAt: now + 1_000, lease: null },
              now
            }
          ])
          assert.strictEqual(outcome?.outcome, "applied")
        })
      yield* backOff(T0 + 10)
      const first = yield* versionsOf("a")
      assert.isTrue(first.slice(1).every((r) => r.available_at.getTime() === BEHIND_ITS_HEAD))
      assert.deepStrictEqual(
        (yield* waitingKeys).map((w) => [w.key, w.head_due.getTime()]),
        [["a", T0 + 1_010]]
      )
      // The next rounds: the head is due, claimed and refused again.
      yield* backOff(T0 + 1_010)
      yield* backOff(T0 + 2_010)
      const later = yield* versionsOf("a")
      assert.notStrictEqual(later[0]!.version, first[0]!.version, "the head itself moved")
      assert.deepStrictEqual(later.slice(1), first.slice(1), "the rows set aside were not written again")
      assert.deepStrictEqual(
        (yield* waitingKeys).map((w) => w.head_due.getTime()),
        [T0 + 3_010]
      )
      // Published: the next claim brings the rest back, and takes the key's new head.
      const [head] = yield* store.claim({
        owner: "relay",
        limit: 1,
        maxPerKey: 1,
        leaseMillis: 30_000,
        now: T0 + 3_010
      })
      yield* store.transition([
        { id: head!.id, from: ["DISPATCHING"], to: "PUBLISHED", leaseOwner: "relay", patch: {}, now: T0 + 3_011 }
      ])
      const next = yield* store.claim({ owner: "relay", limit: 5, maxPerKey: 5, leaseMillis: 30_000, now: T0 + 3_011 })
      assert.deepStrictEqual(
        next.map((m) => m.id),
        rows.slice(1, 6).map((r) => r.id)
      )
      assert.deepStrictEqual(yield* waitingKeys, [])
      assert.isTrue(
        (yield* versionsOf("a")).slice(1).every((r) => r.available_at.getTime() === T0),
        "back at their creation time"
      )
    }).pipe(Effect.provide(StoreLive))
  )

  it.live(
    "relays sending heads back at random while rows arrive: each row published once, in order, none left set aside",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const keys = Array.from({ length: 24 }, (_, i) => `user-${i}`)
        const start = Date.now()
        const initial = keys.flatMap((key) => Array.from({ length: 8 }, () => draft(key, start)))
        yield* store.insert(initial)
        let total = initial.length
        const publishedSeqs = new Map<string, Array<number>>()
        const published = new Set<string>()
        const backOffs = new Map<string, number>()
        const violations: Array<string> = []
        let writing = true

        const writer = Effect.gen(function* () {
          for (let i = 0; i < 40; i++) {
            const now = Date.now()
            const batch = Array.from({ length: 6 }, (_, j) => draft(keys[(i * 7 + j) % keys.length]!, now))
            yield* store.insert(batch)
            total += batch.length
            yield* Effect.sleep("15 millis")
          }
          writing = false
        })

        const relay = (owner: string) =>
          Effect.gen(function* () {
            const deadline = Date.now() + 60_000
            while ((writing || published.size < total) && Date.now() < deadline) {
              const now = Date.now()
              const batch = yield* store.claim({ owner, limit: 10, maxPerKey: 2, leaseMillis: 30_000, now })
              if (batch.length === 0) {
                yield* Effect.sleep("3 millis")
                continue
              }
              // Per key: send its claimed rows back to wait (a refused publish, at most twice per
              // head), or publish them in order.
              const byKey = new Map<string, typeof batch>()
              for (const m of batch) byKey.set(m.key!, [...(byKey.get(m.key!) ?? []), m])
              const back = []
              const done = []
              for (const rowsOfKey of byKey.values()) {
                const head = rowsOfKey[0]!
                const tries = backOffs.get(head.id) ?? 0
                if (tries < 2 && Math.random() < 0.4) {
                  backOffs.set(head.id, tries + 1)
                  back.push(...rowsOfKey)
                } else done.push(...rowsOfKey)
              }
              yield* Effect.sleep(`${1 + Math.floor(Math.random() * 3)} millis`)
              const at = Date.now()
              if (back.length > 0)
                yield* store.transition(
                  back.map((m) => ({
                    id: m.id,
                    from: ["DISPATCHING"],
                    to: "PENDING",
                    leaseOwner: owner,
                    patch: { availableAt: at + 5 + Math.floor(Math.random() * 20), lease: null },
                    now: at
                  }))
                )
              if (done.length > 0) {
                const outcomes = yield* store.transition(
                  done.map((m) => ({
                    id: m.id,
                    from: ["DISPATCHING"],
                    to: "PUBLISHED",
                    leaseOwner: owner,
                    patch: { publishedAt: at },
                    now: at
                  }))
                )
                done.forEach((m, i) => {
                  if (outcomes[i]?.outcome !== "applied") violations.push(`${m.id} not marked: ${outcomes[i]?.outcome}`)
                  if (published.has(m.id)) violations.push(`${m.id} published twice`)
                  published.add(m.id)
                  const seqs = publishedSeqs.get(m.key!) ?? []
                  if (seqs.length > 0 && seqs[seqs.length - 1]! > m.seq)
                    violations.push(`${m.key}: seq ${m.seq} published after ${seqs[seqs.length - 1]}`)
                  publishedSeqs.set(m.key!, [...seqs, m.seq])
                })
              }
            }
          })

        // In every committed state, a row set aside has its key recorded.
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const orphans: Array<string> = []
        let samples = 0
        const sampler = Effect.gen(function* () {
          while (writing || published.size < total) {
            const rows = yield* sql.unsafe<{ key: string }>(
              `SELECT DISTINCT m.key FROM ${t.message} m
                WHERE m.status = 'PENDING' AND m.available_at = $1
                  AND NOT EXISTS (SELECT 1 FROM ${t.waitingKey} w WHERE w.key = m.key)`,
              [new Date(BEHIND_ITS_HEAD)]
            ).withoutTransform
            samples++
            orphans.push(...rows.map((r) => r.key))
            yield* Effect.sleep("10 millis")
          }
        })

        yield* Effect.all([writer, sampler, ...Array.from({ length: RELAYS }, (_, i) => relay(`relay-${i}`))], {
          concurrency: "unbounded",
          discard: true
        })
        assert.deepStrictEqual(violations, [])
        assert.deepStrictEqual(orphans, [], `keys with rows set aside but not recorded (${samples} samples)`)
        assert.isAbove(
          [...backOffs.values()].reduce((a, b) => a + b, 0),
          50,
          "heads were sent back often enough to exercise the set-aside rows"
        )
        assert.strictEqual(published.size, total, "every row published")
        yield* store.claim({ owner: "last", limit: 10, maxPerKey: 1, leaseMillis: 30_000, now: Date.now() })
        assert.deepStrictEqual(yield* waitingKeys, [], "no key left recorded")
        const stats = yield* store.stats(Date.now())
        assert.deepStrictEqual(stats.byStatus, { PUBLISHED: total })
      }).pipe(Effect.provide(StoreLive)),
    { timeout: 120_000 }
  )

  it.live("two claims bringing keys back at once never wait on each other", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const t = yield* PgTables
      // j's head is due for claim B only; k's for both. Claim A takes k, and is held in its
      // bring-back statement by a row lock (a third session) while claim B runs: B must not wait
      // for A on k, and A's scan then meets j (first PENDING row set aside) while B takes j.
      const j1 = draft("j", T0)
      const j2 = draft("j", T0 + 1)
      const k1 = draft("k", T0)
      yield* store.insert([j1, j2, k1])
      const outcome = yield* Effect.promise(async () => {
        const connect = async () => {
          const client = new pg.Client({ connectionString: databaseUrl })
          await client.connect()
          return client
        }
        const [setup, holder, a, b] = await Promise.all([connect(), connect(), connect(), connect()])
        try {
          await setup.query(`UPDATE ${t.message} SET available_at = $1 WHERE id = ANY($2::uuid[])`, [
            new Date(BEHIND_ITS_HEAD),
            [j1.id, k1.id]
          ])
          await setup.query(`INSERT INTO ${t.waitingKey} VALUES ('j', $1), ('k', $2)`, [
            new Date(T0 + 50),
            new Date(T0)
          ])
          await holder.query("BEGIN")
          await holder.query(`SELECT 1 FROM ${t.message} WHERE id = $1 FOR UPDATE`, [k1.id])
          const claim = (client: pg.Client, owner: string, now: number) =>
            client
              .query<{ key: string }>(`SELECT key FROM ${t.claimFunction}($1, 10, 10, $2, 30000, true)`, [
                owner,
                new Date(now)
              ])
              .then(
                (r) => ({ ok: true as const, keys: r.rows.map((row) => row.key) }),
                (e: { code?: string }) => ({ ok: false as const, code: e.code })
              )
          const claimA = claim(a, "A", T0 + 10)
          await new Promise((resolve) => setTimeout(resolve, 300))
          const claimB = claim(b, "B", T0 + 100)
          await new Promise((resolve) => setTimeout(resolve, 300))
          await holder.query("COMMIT")
          return await Promise.all([claimA, claimB])
        } finally {
          await Promise.all([setup, holder, a, b].map((client) => client.end()))
        }
      })
      assert.deepStrictEqual(outcome, [
        { ok: true, keys: ["k"] },
        { ok: true, keys: ["j", "j"] }
      ])
      assert.deepStrictEqual(yield* waitingKeys, [])
    }).pipe(Effect.provide(StoreLive))
  )

  it.live(
    "a relay role granted the tables before migration 17 fails its claim with a typed error naming the waiting-key table, and claims once granted it",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const role = `relay_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* (yield* OutboxStore).insert([draft("a", T0)])
        yield* sql.unsafe(`CREATE ROLE ${role} LOGIN`).unprepared
        yield* Effect.addFinalizer(() =>
          Effect.ignore(
            Effect.andThen(sql.unsafe(`DROP OWNED BY ${role}`).unprepared, sql.unsafe(`DROP ROLE ${role}`).unprepared)
          )
        )
        // What a relay's role was granted on an outbox of migration 16.
        yield* sql.unsafe(`GRANT USAGE ON SCHEMA "${t.schema}" TO ${role}`).unprepared
        yield* sql.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${t.message} TO ${role}`).unprepared
        const url = new URL(databaseUrl)
        url.username = role
        const asRole = PgOutboxStore.layer().pipe(
          Layer.provide(Layer.succeed(PgTables, t)),
          Layer.provide(PgClient.layer({ url: Redacted.make(url.toString()), maxConnections: 1 }))
        )
        const claim = Effect.gen(function* () {
          const store = yield* OutboxStore
          return yield* store.claim({ owner: "relay", limit: 10, maxPerKey: 10, leaseMillis: 30_000, now: T0 + 1 })
        }).pipe(Effect.provide(asRole))
        const refused = yield* Effect.flip(claim)
        assert.strictEqual(refused._tag, "StoreError")
        assert.include(refused.message, "waiting_key")
        assert.include(refused.message, "permission denied")
        yield* sql.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${t.waitingKey} TO ${role}`).unprepared
        assert.strictEqual((yield* claim).length, 1)
      }).pipe(Effect.scoped, Effect.provide(StoreLive))
  )
})
