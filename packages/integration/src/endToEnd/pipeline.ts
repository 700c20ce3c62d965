/**
 * The end-to-end case: two relays and a consumer group of two members run while events are
 * enqueued; then no loss, no phantom, per-key order on the broker and in the effects, every
 * effect applied exactly once.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import { assert } from "@effect/vitest"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Relay from "@effect-outbox/core/Relay"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import { awaitApplied, EVENTS, enqueueAll, KEYS, orderOf } from "./scenario.ts"
import type { Case } from "./support.ts"

const Event = Schema.Struct({ key: Schema.String, seq: Schema.Number })

export const exactlyOnce: Case = {
  name: `${EVENTS} events over ${KEYS} keys: no loss, no phantom, per-key order, effects exactly once`,
  run: ({ keyConcurrency, prefix, schema, namedTopic }) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const topic = `${prefix}-e2e-${randomUUID()}`
      yield* namedTopic(topic, 4)
      yield* namedTopic(`${topic}.DLT`, 1)
      const effects = `"${schema}".effects`
      yield* sql.unsafe(
        `CREATE TABLE ${effects} (n bigserial PRIMARY KEY, event_id uuid NOT NULL, key text NOT NULL, seq int NOT NULL)`
      ).unprepared

      // Two consumer-group members and two relays, all running before the first event exists.
      // One member commits a transaction per record, the other one per fetched batch.
      const groupId = `${prefix}-e2e-${randomUUID()}`
      const consumer = (name: string, transaction: "per-record" | "per-batch") =>
        Consumer.make({
          groupId,
          topics: [topic],
          schema: Event,
          fromBeginning: true,
          transaction,
          ...(keyConcurrency === undefined
            ? {}
            : { concurrency: { by: "key" as const, perPartition: keyConcurrency } }),
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
    })
}
