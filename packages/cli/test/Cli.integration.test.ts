// The operator CLI against the real PostgreSQL and Kafka: every command, run through the real
// command parser, on rows put in place through the library's own API (a fresh schema per test).

import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { KafkaClient } from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Outbox from "@effect-outbox/core/Outbox"
import { type EventId, jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { ParkedStore } from "@effect-outbox/core/ParkedStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Transition from "@effect-outbox/core/Transition"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"
import { brokers, deleteTopics, poisonLetters } from "./support/kafka.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** A fresh migrated schema with the library's services on it, dropped afterwards. */
const fixture = Effect.gen(function* () {
  const schema = `cli_${randomUUID().replaceAll("-", "").slice(0, 20)}`
  const scope = yield* Effect.scope
  const context = yield* Layer.buildWithScope(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
      Layer.provideMerge(PgOutbox.layer({ schema, store: { recordTransitions: true }, wakeUp: { listen: false } })),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 2 }))
    ),
    scope
  )
  yield* Effect.addFinalizer(() =>
    Effect.flatMap(
      Effect.service(SqlClient.SqlClient),
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.provideContext(context), Effect.ignore)
  )
  // Seeding logs each transition at Info: keep the test output to warnings.
  const use = <A, E>(effect: Effect.Effect<A, E, any>) =>
    Effect.provideContext(effect, context).pipe(
      Effect.provideService(References.MinimumLogLevel, "Warn")
    ) as Effect.Effect<A, E>
  const audit: Array<string> = []
  const logger = Logger.make(
    ({ message }) => void audit.push(Array.isArray(message) ? message.join(" ") : String(message))
  )
  /** Runs the CLI; answers its standard output and its failure, if any. */
  const cli = (...args: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Cli.run(["--database-url", databaseUrl, "--schema", schema, "--brokers", brokers, ...args])
      )
      const out = (yield* TestConsole.logLines).map(String).join("\n")
      const err = (yield* TestConsole.errorLines).map(String).join("\n")
      return { ok: exit._tag === "Success", out, err }
    }).pipe(
      Effect.provide(TestConsole.layer),
      Effect.provide(NodeServices.layer),
      Effect.provideService(Logger.CurrentLoggers, new Set([logger]))
    )
  return { schema, use, cli, audit }
})

const enqueue = (topic: string, n: number, options: { key?: string; prequeued?: boolean } = {}) =>
  Outbox.enqueueAutocommit({
    topic,
    key: options.key ?? `k${n}`,
    payload: jsonPayload({ n }),
    ...(options.prequeued === undefined ? {} : { prequeued: options.prequeued })
  })

/** Enqueues and drives the rows to FAILURE through the transition helper, as a relay giving up would. */
const failed = (topic: string, ns: ReadonlyArray<number>) =>
  Effect.gen(function* () {
    const ids = yield* Effect.forEach(ns, (n) => enqueue(topic, n))
    const claimed = yield* Transition.claim({ owner: "relay-x", limit: 100, maxPerKey: 100, leaseMillis: 60_000 })
    yield* Transition.markPublishFailed(
      claimed
        .filter((row) => ids.includes(row.id))
        .map((row) => ({
          id: row.id,
          owner: "relay-x",
          reason: "PermanentPublishError: record too large",
          attempts: 10,
          retryAt: null
        }))
    )
    return ids
  })

const rowOf = (id: EventId) => OutboxStore.use((store) => store.get(id)).pipe(Effect.map(Option.getOrThrow))

describe("effect-outbox CLI", () => {
  it.live("status: counts by status and topic, oldest pending age, stale leases, failures (human and --json)", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const [bad] = yield* f.use(failed("payments", [1]))
      // A claim whose lease already ran out: stale.
      yield* f.use(enqueue("audit", 5))
      yield* f.use(Transition.claim({ owner: "dead-relay", limit: 10, maxPerKey: 10, leaseMillis: 1 }))
      yield* f.use(enqueue("orders", 2))
      yield* f.use(enqueue("orders", 3))
      yield* f.use(enqueue("orders", 4, { prequeued: true }))
      yield* Effect.sleep("20 millis")

      const json = yield* f.cli("status", "--json")
      assert.isTrue(json.ok, json.err)
      const report = JSON.parse(json.out)
      assert.strictEqual(report.total, 5)
      assert.deepStrictEqual(report.byStatus, { FAILURE: 1, DISPATCHING: 1, PENDING: 2, PREQUEUED: 1 })
      assert.strictEqual(report.staleLeases, 1)
      assert.isAtLeast(report.oldestPendingAgeMillis, 0)
      assert.strictEqual(report.failures.length, 1)
      assert.strictEqual(report.failures[0].id, bad)
      assert.include(report.failures[0].lastError, "record too large")
      const orders = report.topics.find((t: { topic: string }) => t.topic === "orders")
      assert.deepStrictEqual(orders.byStatus, { PENDING: 2, PREQUEUED: 1 })
      assert.strictEqual(report.topics.length, 3)

      const oneTopic = JSON.parse((yield* f.cli("status", "--topic", "payments", "--json")).out)
      assert.deepStrictEqual(oneTopic.byStatus, { FAILURE: 1 })

      const human = yield* f.cli("status")
      assert.isTrue(human.ok)
      assert.include(human.out, "events 5")
      assert.include(human.out, "stale leases: 1")
      assert.include(human.out, "failures: 1")
      assert.include(human.out, "recent failures:")
      assert.include(human.out, bad!)
    }).pipe(Effect.scoped)
  )

  it.live("status: rows stuck UNDER_PROCESSING past --stuck-after are listed with their repair (R4.4)", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const id = yield* f.use(enqueue("orders", 1))
      yield* f.use(Transition.claim({ owner: "relay-1", limit: 10, maxPerKey: 10, leaseMillis: 60_000 }))
      yield* f.use(Transition.markPublished([{ id, receipt: { topic: "orders", partition: 1, offset: "9" } }]))
      yield* f.use(Transition.startProcessing(id))
      yield* Effect.sleep("50 millis")

      const fresh = JSON.parse((yield* f.cli("status", "--json")).out)
      assert.deepStrictEqual(fresh.stuckProcessing.rows, [], "not stuck under the default 15 minutes")
      const json = yield* f.cli("status", "--stuck-after", "10ms", "--json")
      assert.isTrue(json.ok, json.err)
      const report = JSON.parse(json.out)
      assert.strictEqual(report.stuckProcessing.stuckAfterMillis, 10)
      assert.deepStrictEqual(
        report.stuckProcessing.rows.map((r: { id: string }) => r.id),
        [id]
      )
      const human = yield* f.cli("status", "--stuck-after", "10ms")
      assert.include(human.out, "stuck in processing")
      assert.include(human.out, `effect-outbox dlt replay orders.DLT --event-id ${id} --execute`)
      assert.include(human.out, "orders/1@9")
      const bad = yield* f.cli("status", "--stuck-after", "soon")
      assert.isFalse(bad.ok)
    }).pipe(Effect.scoped)
  )

  it.live("inspect: the row, its receipt, its recorded history; an unknown id is a clear error", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const id = yield* f.use(enqueue("orders", 1))
      yield* f.use(Transition.claim({ owner: "relay-1", limit: 10, maxPerKey: 10, leaseMillis: 60_000 }))
      yield* f.use(Transition.markPublished([{ id, receipt: { topic: "orders", partition: 2, offset: "41" } }]))

      const human = yield* f.cli("inspect", id)
      assert.isTrue(human.ok, human.err)
      assert.include(human.out, `event ${id}`)
      assert.include(human.out, "status        PUBLISHED")
      assert.include(human.out, "receipt       orders/2@41")
      assert.match(human.out, /DISPATCHING\s+PUBLISHED/)
      assert.include(human.out, '{"n":1}')

      const json = JSON.parse((yield* f.cli("inspect", id, "--json")).out)
      assert.strictEqual(json.message.status, "PUBLISHED")
      assert.deepStrictEqual(json.message.receipt, { topic: "orders", partition: 2, offset: "41" })
      assert.deepStrictEqual(
        json.history.map((h: { to: string }) => h.to),
        ["PUBLISHED"]
      )

      const missing = yield* f.cli("inspect", "0190a0a0-0000-7000-8000-000000000000")
      assert.isFalse(missing.ok)
      assert.include(missing.err, "no outbox event with id")
      const garbage = yield* f.cli("inspect", "not-an-id")
      assert.isFalse(garbage.ok)
      assert.include(garbage.err, "is not an event id")
    }).pipe(Effect.scoped)
  )

  it.live(
    "requeue: explicit filters required, dry run by default, --execute moves FAILURE -> PENDING with an audit line",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const [a, b] = yield* f.use(failed("payments", [1, 2]))
        const [c] = yield* f.use(failed("refunds", [3]))

        const bare = yield* f.cli("requeue", "--reason", "fixed")
        assert.isFalse(bare.ok)
        assert.include(bare.err, "name the rows")

        const noReason = yield* f.cli("requeue", "--topic", "payments", "--execute")
        assert.isFalse(noReason.ok)
        assert.include(noReason.err, "--reason is required")

        const dry = yield* f.cli("requeue", "--topic", "payments", "--reason", "limit raised")
        assert.isTrue(dry.ok, dry.err)
        assert.include(dry.out, "dry run: 2 rows would move FAILURE -> PENDING")
        assert.strictEqual((yield* f.use(rowOf(a!))).status, "FAILURE")

        const done = yield* f.cli("requeue", "--id", a!, "--reason", "limit raised", "--operator", "alice", "--execute")
        assert.isTrue(done.ok, done.err)
        assert.include(done.out, "requeue: 1/1 rows moved FAILURE -> PENDING")
        const requeued = yield* f.use(rowOf(a!))
        assert.strictEqual(requeued.status, "PENDING")
        assert.strictEqual(requeued.attempts, 0)
        assert.strictEqual((yield* f.use(rowOf(b!))).status, "FAILURE")
        assert.strictEqual((yield* f.use(rowOf(c!))).status, "FAILURE")
        assert.isTrue(
          f.audit.some((line) => line.includes("AUDIT outbox requeue by alice") && line.includes("limit raised"))
        )

        // Rows not in FAILURE are not selected: requeueing twice changes nothing.
        const again = yield* f.cli("requeue", "--id", a!, "--reason", "again", "--execute")
        assert.include(again.out, "no matching rows")

        const all = JSON.parse((yield* f.cli("requeue", "--all", "--reason", "bulk", "--execute", "--json")).out)
        assert.deepStrictEqual(
          all.outcomes.map((o: { outcome: string }) => o.outcome),
          ["applied", "applied"]
        )
        assert.strictEqual((yield* f.use(rowOf(c!))).status, "PENDING")
      }).pipe(Effect.scoped)
  )

  it.live(
    "skip: dry run by default, --execute moves FAILURE -> SKIPPED with an audit line; status counts blocked keys; the key goes on",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const [a, b] = yield* f.use(failed("payments", [1, 2]))
        // a younger event of a's key waits behind its FAILURE head
        const younger = yield* f.use(enqueue("payments", 1))

        const status = JSON.parse((yield* f.cli("status", "--json")).out)
        assert.strictEqual(status.blockedKeys, 2)
        assert.include((yield* f.cli("status")).out, "blocked keys: 2")
        assert.deepStrictEqual(
          yield* f.use(Transition.claim({ owner: "r", limit: 10, maxPerKey: 10, leaseMillis: 60_000 })),
          []
        )

        const noReason = yield* f.cli("skip", "--id", a!, "--execute")
        assert.isFalse(noReason.ok)
        assert.include(noReason.err, "--reason is required")

        const dry = yield* f.cli("skip", "--id", a!, "--reason", "obsolete order")
        assert.isTrue(dry.ok, dry.err)
        assert.include(dry.out, "dry run: 1 rows would move FAILURE -> SKIPPED")
        assert.strictEqual((yield* f.use(rowOf(a!))).status, "FAILURE")

        const done = yield* f.cli("skip", "--id", a!, "--reason", "obsolete order", "--operator", "carol", "--execute")
        assert.isTrue(done.ok, done.err)
        assert.include(done.out, "skip: 1/1 rows moved FAILURE -> SKIPPED")
        const skipped = yield* f.use(rowOf(a!))
        assert.strictEqual(skipped.status, "SKIPPED")
        assert.include(skipped.lastError!, "skipped by carol: obsolete order")
        assert.strictEqual((yield* f.use(rowOf(b!))).status, "FAILURE")
        assert.isTrue(
          f.audit.some((line) => line.includes("AUDIT outbox skip by carol") && line.includes("obsolete order"))
        )
        assert.strictEqual(JSON.parse((yield* f.cli("status", "--json")).out).blockedKeys, 1)

        // the key goes on without it
        const claimed = yield* f.use(Transition.claim({ owner: "r", limit: 10, maxPerKey: 10, leaseMillis: 60_000 }))
        assert.deepStrictEqual(
          claimed.map((row) => row.id),
          [younger]
        )
      }).pipe(Effect.scoped)
  )

  it.live("release: PREQUEUED -> PENDING for the selected rows only", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const held = yield* f.use(enqueue("reminders", 1, { prequeued: true }))
      const other = yield* f.use(enqueue("reminders", 2, { prequeued: true }))
      const dry = yield* f.cli("release", "--id", held)
      assert.include(dry.out, "dry run: 1 rows would move PREQUEUED -> PENDING")
      assert.strictEqual((yield* f.use(rowOf(held))).status, "PREQUEUED")
      const done = yield* f.cli("release", "--id", held, "--execute", "--operator", "bob")
      assert.isTrue(done.ok, done.err)
      assert.strictEqual((yield* f.use(rowOf(held))).status, "PENDING")
      assert.strictEqual((yield* f.use(rowOf(other))).status, "PREQUEUED")
      assert.isTrue(f.audit.some((line) => line.includes("AUDIT outbox release by bob")))
    }).pipe(Effect.scoped)
  )

  it.live("purge: counts in a dry run, deletes only finished rows older than the given age", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const done = yield* f.use(enqueue("orders", 1))
      const pending = yield* f.use(enqueue("orders", 2, { key: "other" }))
      // Drive `done` to SUCCESS the way a consumer does; `pending` stays PENDING... after a claim.
      yield* f.use(Transition.claim({ owner: "r", limit: 1, maxPerKey: 1, leaseMillis: 60_000 }))
      yield* f.use(Transition.startProcessing(done))
      yield* f.use(Transition.finishProcessing(done, "SUCCESS"))
      yield* Effect.sleep("30 millis")

      const bad = yield* f.cli("purge", "--older-than", "soon")
      assert.isFalse(bad.ok)
      assert.include(bad.err, "is not a duration")
      const unsafe = yield* f.cli("purge", "--older-than", "1ms", "--status", "PENDING", "--execute")
      assert.isFalse(unsafe.ok)

      const dry = yield* f.cli("purge", "--older-than", "10ms")
      assert.isTrue(dry.ok, dry.err)
      assert.include(dry.out, "dry run: 1 rows")
      assert.strictEqual((yield* f.use(rowOf(done))).status, "SUCCESS")
      const young = JSON.parse((yield* f.cli("purge", "--older-than", "1h", "--json")).out)
      assert.strictEqual(young.rows, 0)

      const run = yield* f.cli("purge", "--older-than", "10ms", "--execute")
      assert.isTrue(run.ok, run.err)
      assert.include(run.out, "purged 1 rows")
      const left = yield* f.use(OutboxStore.use((store) => store.get(done)))
      assert.isTrue(Option.isNone(left))
      assert.strictEqual((yield* f.use(rowOf(pending))).status, "PENDING")
    }).pipe(Effect.scoped)
  )

  it.live(
    "recover-stale: lists expired leases; --execute probes Kafka, marks found rows PUBLISHED and requeues the rest",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const topic = `cli-stale-${randomUUID().slice(0, 8)}`
        yield* Effect.addFinalizer(() => Effect.promise(() => deleteTopics([topic]).catch(() => undefined)))
        const kafka = yield* Layer.buildWithScope(
          KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-test" }),
          yield* Effect.scope
        )
        yield* Effect.provideContext(
          BrokerAdmin.use((admin) => admin.ensureTopic({ topic, partitions: 1 })),
          kafka
        )
        const sent = yield* f.use(enqueue(topic, 1, { key: "a" }))
        const lost = yield* f.use(enqueue(topic, 2, { key: "b" }))
        const rows = yield* f.use(
          Transition.claim({ owner: "crashed-relay", limit: 10, maxPerKey: 10, leaseMillis: 1 })
        )
        // The crashed relay got `sent` onto the broker before dying; `lost` never left.
        const row = rows.find((r) => r.id === sent)!
        const [outcome] = yield* Effect.provideContext(
          Publisher.use((p) =>
            p.publish([{ id: sent, topic, key: row.key, partition: null, headers: row.headers, payload: row.payload }])
          ),
          kafka
        )
        assert.strictEqual(outcome!._tag, "Success")
        yield* Effect.sleep("20 millis")

        const dry = yield* f.cli("recover-stale")
        assert.isTrue(dry.ok, dry.err)
        assert.include(dry.out, "dry run: 2 stale rows")
        assert.strictEqual((yield* f.use(rowOf(sent))).status, "DISPATCHING")

        const run = yield* f.cli("recover-stale", "--execute")
        assert.isTrue(run.ok, run.err)
        assert.include(run.out, "recovered: 1 found on the broker (published), 1 requeued")
        assert.strictEqual((yield* f.use(rowOf(sent))).status, "PUBLISHED")
        assert.strictEqual((yield* f.use(rowOf(lost))).status, "PENDING")
      }).pipe(Effect.scoped)
  )

  it.live("recover-stale --execute changes nothing while a relay's recovery holds the recovery lease", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const topic = `cli-stale-held-${randomUUID().slice(0, 8)}`
      const id = yield* f.use(enqueue(topic, 1, { key: "a" }))
      yield* f.use(Transition.claim({ owner: "crashed-relay", limit: 10, maxPerKey: 10, leaseMillis: 1 }))
      yield* f.use(OutboxStore.use((store) => store.acquireRecoveryLease({ owner: "relay-7", ttlMillis: 60_000 })))
      yield* Effect.sleep("20 millis")
      const run = yield* f.cli("recover-stale", "--execute")
      assert.isTrue(run.ok, run.err)
      assert.include(run.out, "nothing changed: relay-7 holds the recovery lease")
      assert.strictEqual((yield* f.use(rowOf(id))).status, "DISPATCHING")
      yield* f.use(OutboxStore.use((store) => store.releaseRecoveryLease("relay-7")))
    }).pipe(Effect.scoped)
  )

  it.live("status --group: each group's consumer lag on the outbox's topics, from the broker (human and --json)", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const topic = `cli-lag-${randomUUID().slice(0, 8)}`
      yield* Effect.addFinalizer(() => Effect.promise(() => deleteTopics([topic]).catch(() => undefined)))
      const kafka = yield* Layer.buildWithScope(
        KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-test" }),
        yield* Effect.scope
      )
      const inKafka = <A, E>(effect: Effect.Effect<A, E, any>) =>
        Effect.provideContext(effect, kafka) as Effect.Effect<A, E>
      yield* inKafka(BrokerAdmin.use((admin) => admin.ensureTopic({ topic, partitions: 2 })))
      // Three records on partition 0, one on partition 1; the outbox knows the topic.
      yield* f.use(enqueue(topic, 1))
      const ids = ["0190a0a0-0000-7000-8000-0000000000c1", "0190a0a0-0000-7000-8000-0000000000c2"] as Array<EventId>
      const records = [0, 0, 0, 1].map((partition, i) => ({
        id: ids[i % 2]!,
        topic,
        key: null,
        partition,
        headers: {},
        payload: jsonPayload({ i })
      }))
      yield* inKafka(Publisher.use((p) => p.publish(records)))
      // "billing" finished one record of partition 0 and all of partition 1; "audit" never committed.
      const billing = `cli-lag-billing-${randomUUID().slice(0, 8)}`
      const audit = `cli-lag-audit-${randomUUID().slice(0, 8)}`
      yield* inKafka(
        KafkaClient.use(({ admin }) =>
          Effect.promise(() =>
            admin.setOffsets({
              groupId: billing,
              topic,
              partitions: [
                { partition: 0, offset: "1" },
                { partition: 1, offset: "1" }
              ]
            })
          )
        )
      )

      const json = yield* f.cli("status", "--group", billing, "--group", audit, "--json")
      assert.isTrue(json.ok, json.err)
      const report = JSON.parse(json.out)
      assert.deepStrictEqual(report.consumerLag, [
        {
          group: billing,
          topic,
          lag: 2,
          partitions: [
            { partition: 0, committed: "1", end: "3", lag: 2 },
            { partition: 1, committed: "1", end: "1", lag: 0 }
          ]
        },
        {
          group: audit,
          topic,
          lag: 4,
          partitions: [
            { partition: 0, committed: null, end: "3", lag: 3 },
            { partition: 1, committed: null, end: "1", lag: 1 }
          ]
        }
      ])

      const human = yield* f.cli("status", "--group", billing)
      assert.isTrue(human.ok, human.err)
      assert.match(human.out, new RegExp(`${billing}\\s+${topic}\\s+2\\s+0:1/3 1:1/1`))
      // Without --group, status does not need the broker and shows no lag.
      const plain = JSON.parse((yield* f.cli("status", "--json")).out)
      assert.isUndefined(plain.consumerLag)
    }).pipe(Effect.scoped)
  )

  it.live("dlt list and replay: dead letters with their errors; replay republishes the selected one to its topic", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const topic = `cli-dlt-${randomUUID().slice(0, 8)}`
      const dlt = `${topic}.DLT`
      yield* Effect.addFinalizer(() => Effect.promise(() => deleteTopics([topic, dlt]).catch(() => undefined)))
      const kafka = yield* Layer.buildWithScope(
        KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-test" }),
        yield* Effect.scope
      )
      const inKafka = <A, E>(effect: Effect.Effect<A, E, any>) =>
        Effect.provideContext(effect, kafka) as Effect.Effect<A, E>
      yield* inKafka(
        BrokerAdmin.use((admin) =>
          Effect.andThen(admin.ensureTopic({ topic, partitions: 1 }), admin.ensureTopic({ topic: dlt, partitions: 1 }))
        )
      )
      const ids = ["0190a0a0-0000-7000-8000-00000000000a", "0190a0a0-0000-7000-8000-00000000000b"] as Array<EventId>
      const letters = yield* poisonLetters(topic, dlt, ids)
      yield* inKafka(Publisher.use((p) => p.publish(letters)))

      const list = yield* f.cli("dlt", "list", dlt)
      assert.isTrue(list.ok, list.err)
      assert.include(list.out, ids[0]!)
      assert.include(list.out, ids[1]!)
      assert.include(list.out, "poison 0")
      const listed = JSON.parse((yield* f.cli("dlt", "list", dlt, "--json")).out)
      assert.deepStrictEqual(
        listed.map((l: { eventId: string }) => l.eventId),
        ids
      )

      const bare = yield* f.cli("dlt", "replay", dlt)
      assert.isFalse(bare.ok)
      assert.include(bare.err, "name the dead letters")
      const dry = yield* f.cli("dlt", "replay", dlt, "--event-id", ids[1]!)
      assert.include(dry.out, "dry run: 1 dead letters would be republished")
      const before = yield* inKafka(TopicReader.use((r) => r.read(topic).pipe(Stream.runCollect)))
      assert.strictEqual(before.length, 0)

      const run = yield* f.cli("dlt", "replay", dlt, "--event-id", ids[1]!, "--execute")
      assert.isTrue(run.ok, run.err)
      assert.include(run.out, "replayed 1 dead letters")
      const after = yield* inKafka(TopicReader.use((r) => r.read(topic).pipe(Stream.runCollect)))
      assert.strictEqual(after.length, 1)
      assert.strictEqual(after[0]!.headers["event-id"], ids[1])
      assert.strictEqual(after[0]!.headers[DeadLetter.headers.replayAttempt], "1")
      assert.isUndefined(after[0]!.headers[DeadLetter.headers.errorMessage])
    }).pipe(Effect.scoped)
  )

  it.live("status --dead-letters: per <topic>.DLT, dead letters not yet replayed; replay brings it down (R5.3)", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const topic = `cli-depth-${randomUUID().slice(0, 8)}`
      const dlt = `${topic}.DLT`
      yield* Effect.addFinalizer(() => Effect.promise(() => deleteTopics([topic, dlt]).catch(() => undefined)))
      const kafka = yield* Layer.buildWithScope(
        KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-test" }),
        yield* Effect.scope
      )
      const inKafka = <A, E>(effect: Effect.Effect<A, E, any>) =>
        Effect.provideContext(effect, kafka) as Effect.Effect<A, E>
      yield* inKafka(
        BrokerAdmin.use((admin) =>
          Effect.andThen(admin.ensureTopic({ topic, partitions: 1 }), admin.ensureTopic({ topic: dlt, partitions: 1 }))
        )
      )
      // The outbox knows the topic (status lists the DLTs of the outbox's topics).
      yield* f.use(enqueue(topic, 1))
      const ids = [0, 1, 2].map((i) => `0190a0a0-0000-7000-8000-00000000001${i}` as EventId)
      const letters = yield* poisonLetters(topic, dlt, ids)
      yield* inKafka(Publisher.use((p) => p.publish(letters)))
      const depth = Effect.map(f.cli("status", "--dead-letters", "--json"), (r) => {
        assert.isTrue(r.ok, r.err)
        const report = JSON.parse(r.out)
        return report.deadLetters.find((d: { deadLetterTopic: string }) => d.deadLetterTopic === dlt)
      })

      assert.deepStrictEqual([(yield* depth).pending, (yield* depth).total], [3, 3])
      const human = yield* f.cli("status", "--dead-letters")
      assert.match(human.out, new RegExp(`${dlt.replaceAll(".", "\\.")}\\s+3\\s+3`))
      assert.isTrue((yield* f.cli("dlt", "replay", dlt, "--event-id", ids[0]!, "--execute")).ok)
      assert.deepStrictEqual([(yield* depth).pending, (yield* depth).total], [2, 3])
      assert.isTrue((yield* f.cli("dlt", "replay", dlt, "--all", "--execute")).ok)
      assert.deepStrictEqual([(yield* depth).pending, (yield* depth).total], [0, 3])
      const plain = JSON.parse((yield* f.cli("status", "--json")).out)
      assert.isUndefined(plain.deadLetters, "the broker is asked only with --dead-letters")
    }).pipe(Effect.scoped)
  )

  it.live("a command without its service says what to set", () =>
    Effect.gen(function* () {
      const result = yield* Effect.exit(Cli.run(["status", "--database-url", ""])).pipe(
        Effect.provide(TestConsole.layer),
        Effect.provide(NodeServices.layer)
      )
      assert.strictEqual(result._tag, "Failure")
    })
  )
})

describe("effect-outbox parked", () => {
  it.live("parked list and release: keys head first; release asks the owning consumer (dry run unless --execute)", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      yield* f.use(
        ParkedStore.use((store) =>
          store.park("billing", [
            { topic: "orders", partition: 2, key: "user-42", offset: "17" },
            { topic: "orders", partition: 2, key: "user-42", offset: "19" }
          ])
        )
      )
      const list = yield* f.cli("parked", "list", "--json")
      assert.isTrue(list.ok, list.err)
      const [parked, ...others] = JSON.parse(list.out) as Array<{ readonly parkedAt?: number }>
      assert.deepStrictEqual(others, [])
      const { parkedAt, ...rest } = parked!
      assert.deepStrictEqual(rest, {
        consumer: "billing",
        topic: "orders",
        partition: 2,
        key: "user-42",
        offsets: ["17", "19"]
      })
      // When the key's oldest position was parked, by the database's clock: a moment ago.
      assert.isAtMost(Math.abs(Date.now() - parkedAt!), 60_000)
      const human = yield* f.cli("parked", "list", "--group", "billing")
      assert.include(human.out, "user-42")

      const target = ["--group", "billing", "--topic", "orders", "--partition", "2", "--key", "user-42"]
      const dry = yield* f.cli("parked", "release", ...target)
      assert.isTrue(dry.ok, dry.err)
      assert.include(dry.out, "dry run")
      assert.deepStrictEqual(yield* f.use(ParkedStore.use((store) => store.releaseRequests("billing"))), [])
      const done = yield* f.cli("parked", "release", ...target, "--execute")
      assert.isTrue(done.ok, done.err)
      assert.deepStrictEqual(yield* f.use(ParkedStore.use((store) => store.releaseRequests("billing"))), [
        { consumer: "billing", topic: "orders", partition: 2, key: "user-42" }
      ])
      const missing = yield* f.cli(
        "parked",
        "release",
        "--group",
        "billing",
        "--topic",
        "orders",
        "--partition",
        "2",
        "--key",
        "nobody",
        "--execute"
      )
      assert.isFalse(missing.ok)
      assert.include(missing.err, "not parked")
    })
  )
})
