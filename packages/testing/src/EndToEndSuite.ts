/**
 * The whole pipeline on real services, one scenario every Kafka adapter runs: events
 * enqueued in committed and rolled-back PostgreSQL transactions, two relays publishing through
 * the adapter's Publisher, one consumer group of two members on its ConsumerSource applying an
 * effect in PostgreSQL. Checked: no loss, no phantom, per-key order on the broker and in the
 * effects, every effect applied exactly once.
 *
 * The issue's scale is 10,000 events (about 90 s on two shared cores); that is what CI runs (`CI`
 * set). Locally the default is 2,000 so a full integration run stays quick; set E2E_EVENTS to
 * choose.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import * as Consumer from "@effect-outbox/core/Consumer"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"

const EVENTS = Number(process.env.E2E_EVENTS ?? (process.env.CI ? 10_000 : 2_000))
const KEYS = 200
const PER_TRANSACTION = 50
const ROLLBACK_EVERY = 5

/** What the scenario needs from a Kafka adapter: the ports of its `*KafkaOutbox.layer`. */
export type KafkaPorts = Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /**
   * Both members run with key-ordered concurrency, this many handlers per partition
   * (`concurrency: { by: "key", perPartition }`); default off (one record at a time).
   */
  readonly keyConcurrency?: number
  /** Names the `describe` block: which client runs the pipeline. */
  readonly name: string
  /** Prefix of the topic and group names, unique per adapter. */
  readonly prefix: string
  /** The adapter's layer (client included). */
  readonly kafka: Layer.Layer<KafkaPorts | R, unknown>
  /** A PostgreSQL client with at least 12 connections. */
  readonly pg: Layer.Layer<SqlClient.SqlClient, unknown>
  /** A fresh schema name; the scenario migrates it and drops it at the end. */
  readonly schema: string
  /** Creates `topic` with `partitions` partitions, deleted when the scope closes. */
  readonly namedTopic: (
    topic: string,
    partitions: number
  ) => Effect.Effect<unknown, unknown, KafkaPorts | R | Scope.Scope>
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

/** Enqueues `EVENTS` events on `topic`, transactions of 50; every fifth transaction rolls back. */
const enqueueAll = (topic: string) =>
  Effect.gen(function* () {
    const committed = new Map<string, { key: string; seq: number }>()
    const rolledBack = new Set<string>()
    // When each committed event's transaction began (at the latest) and committed (at the
    // earliest we know), and its place in it: the order the library owes (docs/ordering.md).
    const placeOf = new Map<string, { tx: number; began: number; ended: number; index: number }>()
    const transactions = Math.ceil(EVENTS / PER_TRANSACTION)
    yield* Effect.forEach(
      Array.from({ length: transactions }, (_, t) => t),
      (t) =>
        Effect.gen(function* () {
          const drafts = Array.from({ length: PER_TRANSACTION }, (_, j) => {
            const i = t * PER_TRANSACTION + j
            const event = { key: `user-${i % KEYS}`, seq: Math.floor(i / KEYS) }
            return { topic, key: event.key, payload: jsonPayload(event) }
          })
          const ids: Array<string> = []
          const work = Effect.gen(function* () {
            ids.push(...(yield* Outbox.enqueue(drafts)))
            if (t % ROLLBACK_EVERY === ROLLBACK_EVERY - 1) return yield* Effect.fail("rolled back on purpose" as const)
          })
          const began = performance.now()
          const outcome = yield* Effect.result(Outbox.withTransaction(work))
          const ended = performance.now()
          drafts.forEach((d, j) => {
            const event = JSON.parse(text(d.payload)) as { key: string; seq: number }
            if (outcome._tag === "Success") {
              committed.set(ids[j]!, event)
              placeOf.set(ids[j]!, { tx: t, began, ended, index: j })
            } else rolledBack.add(ids[j]!)
          })
        }),
      { concurrency: 4, discard: true }
    )
    return { committed, rolledBack, placeOf }
  })

type Place = { readonly tx: number; readonly began: number; readonly ended: number; readonly index: number }

/** The order the library owes between two events, and a check of a sequence against it. */
const orderOf = (placeOf: ReadonlyMap<string, Place>) => {
  // Transactions run 4 at a time and share keys. Per key, `a` must come before `b` when both
  // are in one transaction in that order, or when `a`'s transaction committed before `b`'s
  // began; overlapping transactions have no order between them.
  const mustPrecede = (a: string, b: string) => {
    const pa = placeOf.get(a)!
    const pb = placeOf.get(b)!
    return pa.tx === pb.tx ? pa.index < pb.index : pa.ended < pb.began
  }
  const inOrder = (sequence: ReadonlyArray<string>) => {
    for (let i = 0; i < sequence.length; i++)
      for (let j = i + 1; j < sequence.length; j++)
        if (mustPrecede(sequence[j]!, sequence[i]!)) return `${sequence[j]} must precede ${sequence[i]}`
    return undefined
  }
  return { mustPrecede, inOrder }
}

/** Waits (up to 150 s) until `expected` distinct effects are applied and as many rows are SUCCESS. */
const awaitApplied = (effects: string, expected: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const deadline = Date.now() + 150_000
    let applied = 0
    let successes = 0
    while (Date.now() < deadline) {
      applied = (yield* sql<{
        n: number
      }>`SELECT count(DISTINCT event_id)::int AS n FROM ${sql.literal(effects)}`)[0]!.n
      successes = (yield* store.stats(Date.now())).byStatus.SUCCESS ?? 0
      if (applied === expected && successes === expected) break
      yield* Effect.sleep("250 millis")
    }
    return { applied, successes }
  })

/**
 * Registers the scenario under `describe(options.name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(options: Options<R>): void => {
  const { schema, namedTopic } = options
  const DropSchema = Layer.effectDiscard(
    Effect.addFinalizer(() =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
  )

  const Live = Layer.mergeAll(Outbox.layerWith({ maxPayloadBytes: 1_000_000 }), Inbox.Inbox.layer, DropSchema).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema })),
    Layer.provideMerge(options.pg),
    Layer.provideMerge(options.kafka)
  )

  const Event = Schema.Struct({ key: Schema.String, seq: Schema.Number })

  describe(options.name, () => {
    it.live(
      `${EVENTS} events over ${KEYS} keys${options.keyConcurrency === undefined ? "" : `, key concurrency ${options.keyConcurrency} per partition`}: no loss, no phantom, per-key order, effects exactly once`,
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const topic = `${options.prefix}-e2e-${randomUUID()}`
          yield* namedTopic(topic, 4)
          yield* namedTopic(`${topic}.DLT`, 1)
          const effects = `"${schema}".effects`
          yield* sql.unsafe(
            `CREATE TABLE ${effects} (n bigserial PRIMARY KEY, event_id uuid NOT NULL, key text NOT NULL, seq int NOT NULL)`
          ).unprepared

          // Two consumer-group members and two relays, all running before the first event exists.
          // One member commits a transaction per record, the other one per fetched batch.
          const groupId = `${options.prefix}-e2e-${randomUUID()}`
          const consumer = (name: string, transaction: "per-record" | "per-batch") =>
            Consumer.make({
              groupId,
              topics: [topic],
              schema: Event,
              fromBeginning: true,
              transaction,
              ...(options.keyConcurrency === undefined
                ? {}
                : { concurrency: { by: "key" as const, perPartition: options.keyConcurrency } }),
              handler: (m) =>
                sql`INSERT INTO ${sql.literal(effects)} (event_id, key, seq) VALUES (${m.eventId}::uuid, ${m.payload.key}, ${m.payload.seq})`.pipe(
                  Effect.asVoid
                )
            }).pipe(Effect.annotateLogs({ member: name }))
          yield* consumer("a", "per-record")
          yield* consumer("b", "per-batch")
          yield* Relay.start({ owner: "relay-1", batchSize: 200 })
          yield* Relay.start({ owner: "relay-2", batchSize: 200 })

          const { committed, placeOf, rolledBack } = yield* enqueueAll(topic)
          const { inOrder, mustPrecede } = orderOf(placeOf)
          const stored = yield* sql<{
            id: string
            key: string
          }>`SELECT id::text AS id, key FROM ${sql.literal(`"${schema}".outbox_message`)} ORDER BY seq`
          const creationOrder = new Map<string, Array<string>>()
          for (const row of stored) creationOrder.set(row.key, [...(creationOrder.get(row.key) ?? []), row.id])
          assert.strictEqual(stored.length, committed.size, "every committed event is stored, no rolled-back one is")

          const { applied, successes } = yield* awaitApplied(effects, committed.size)
          assert.strictEqual(applied, committed.size, "no loss: every committed event's effect is applied")
          assert.strictEqual(successes, committed.size, "every row ends SUCCESS")

          // Exactly once: no event's effect twice; no phantom effects.
          const rows = yield* sql<{
            event_id: string
            key: string
          }>`SELECT event_id::text, key FROM ${sql.literal(effects)} ORDER BY n`
          assert.strictEqual(rows.length, committed.size, "each effect exactly once")
          assert.isTrue(
            rows.every((r) => committed.has(r.event_id)),
            "no phantom effects"
          )

          // The broker: every committed event, no rolled-back one; per key, first publications in creation order.
          const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
          const firstSeen = new Map<string, { key: string; partition: number; offset: bigint }>()
          for (const r of records) {
            const id = r.headers["event-id"]!
            assert.isFalse(rolledBack.has(id), "no phantom on the broker")
            const previous = firstSeen.get(id)
            if (previous === undefined || BigInt(r.offset) < previous.offset)
              firstSeen.set(id, { key: r.key!, partition: r.partition, offset: BigInt(r.offset) })
          }
          assert.strictEqual(firstSeen.size, committed.size, "every committed event reached the broker")
          let ordered = 0
          for (const [key, ids] of creationOrder) {
            const placed = ids.map((id) => firstSeen.get(id)!)
            assert.strictEqual(new Set(placed.map((p) => p.partition)).size, 1, `${key} stays on one partition`)
            const published = [...ids].sort((a, b) => Number(firstSeen.get(a)!.offset - firstSeen.get(b)!.offset))
            assert.isUndefined(inOrder(published), `${key} published in order`)
            // …and its effects were applied in that order too.
            const appliedOrder = rows.filter((r) => r.key === key).map((r) => r.event_id)
            assert.isUndefined(inOrder(appliedOrder), `${key} effects in order`)
            for (let i = 1; i < ids.length; i++) if (mustPrecede(ids[i - 1]!, ids[i]!)) ordered++
          }
          // The check has teeth: most neighbouring pairs of a key are ordered ones.
          assert.isAbove(ordered, committed.size / 2)
          yield* Effect.logInfo(
            `e2e: ${committed.size} committed, ${rolledBack.size} rolled back, ${records.length} records on the broker`
          )
        }).pipe(
          Effect.scoped,
          Effect.provide(Live),
          // `Live` provides every service the body needs, the adapter's `R` included; TypeScript
          // cannot subtract a generic `R` from the body's requirements by itself.
          (provided) => provided as Effect.Effect<void, unknown>
        ),
      240_000
    )
  })
}
