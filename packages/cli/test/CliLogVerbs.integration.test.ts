// `effect-outbox log inspect` and `log republish` on the real logical PostgreSQL and the real
// Kafka broker: inspect tells committed / published / quarantined apart; republish's dry run
// sends nothing and counts right; --execute puts exactly the selected events on the topic, in order.
import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgLogProgress from "@effect-outbox/adapter-pg/PgLogProgress"
import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgMigrations from "@effect-outbox/adapter-pg/PgMigrations"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import * as OutboxMessage from "@effect-outbox/core/OutboxMessage"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"
import { brokers, deleteTopics } from "./support/kafka.ts"

const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const suffix = () => randomUUID().replaceAll("-", "").slice(0, 12)

/** A schema of its own, migrated; topics of its own on the broker; the CLI with captured output and logs. */
const fixture = (topics: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const schema = `cli_verbs_${suffix()}`
    const sql = yield* SqlClient.SqlClient
    yield* Effect.addFinalizer(() =>
      sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
    )
    yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
    const writer = yield* Effect.service(LogWriter).pipe(Effect.provide(PgLogSource.layerWriter({ schema })))
    yield* Effect.addFinalizer(() => Effect.promise(() => deleteTopics(topics).catch(() => undefined)))
    const kafka = yield* Layer.buildWithScope(
      KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-verbs-test" }),
      yield* Effect.scope
    )
    const inKafka = <A, E>(effect: Effect.Effect<A, E, any>) =>
      Effect.provideContext(effect, kafka) as Effect.Effect<A, E>
    for (const topic of topics) yield* inKafka(BrokerAdmin.use((admin) => admin.ensureTopic({ topic, partitions: 1 })))
    const onTopic = (topic: string) =>
      inKafka(TopicReader.use((r) => r.read(topic).pipe(Stream.runCollect))).pipe(
        Effect.map((records) => records.map((r) => r.headers["event-id"]))
      )
    const audit: Array<string> = []
    const logger = Logger.make(
      ({ message }) => void audit.push(Array.isArray(message) ? message.join(" ") : String(message))
    )
    const cli = (...args: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(Cli.run(["--database-url", logicalUrl, "--schema", schema, ...args]))
        const out = (yield* TestConsole.logLines).map(String).join("\n")
        const err = (yield* TestConsole.errorLines).map(String).join("\n")
        return { ok: exit._tag === "Success", out, err }
      }).pipe(
        Effect.provide(TestConsole.layer),
        Effect.provide(NodeServices.layer),
        Effect.provideService(Logger.CurrentLoggers, new Set([logger]))
      )
    // Written one at a time, a millisecond apart, so each has its own id time.
    const write = (topic: string, key: string) =>
      Effect.gen(function* () {
        yield* Effect.sleep("2 millis")
        const message: LogMessage = {
          id: yield* OutboxMessage.makeEventId,
          topic,
          key,
          partition: null,
          headers: { source: "cli-test" },
          payload: new TextEncoder().encode(`{"key":"${key}"}`),
          createdAt: Date.now()
        }
        yield* writer.emit([message])
        return message
      })
    return { schema, sql, cli, write, onTopic, audit }
  })

/** Runs `effect` with `KAFKA_BROKERS` unset, so the CLI answers from the database alone. */
const withoutBrokerEnv = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const saved = process.env.KAFKA_BROKERS
      delete process.env.KAFKA_BROKERS
      return saved
    }),
    () => effect,
    (saved) =>
      Effect.sync(() => {
        if (saved !== undefined) process.env.KAFKA_BROKERS = saved
      })
  )

describe("effect-outbox log inspect", () => {
  it.live("tells committed, published (by the broker) and quarantined apart", () =>
    Effect.gen(function* () {
      const topic = `cli-inspect-${suffix()}`
      const f = yield* fixture([topic])
      const slot = `cli_verbs_${suffix()}`
      const published = yield* f.write(topic, "a")
      yield* (yield* PgLogProgress.make({ schema: f.schema, slot })).save("0/10")
      const pending = yield* f.write(topic, "b")
      const refused = yield* f.write(topic, "c")
      const { store } = yield* PgLogQuarantine.make({ schema: f.schema, slot })
      yield* store.put([
        { message: refused, position: "0/10", status: "QUARANTINED", reason: "the topic does not exist" }
      ])
      const inspect = (id: string, ...more: ReadonlyArray<string>) =>
        f.cli("log", "inspect", id, "--slot", slot, ...more)

      const one = yield* withoutBrokerEnv(inspect(published.id))
      assert.isTrue(one.ok, one.err)
      assert.include(one.out, "committed: yes")
      assert.include(one.out, `topic ${topic}, key a, partition -`)
      assert.include(one.out, 'payload (11 bytes) {"key":"a"}')
      assert.include(one.out, "published: unknown (the event table keeps no commit position per event")
      assert.include(one.out, "the relay's saved progress (0/10)")
      assert.include(one.out, "quarantined: no")

      const three = yield* withoutBrokerEnv(inspect(refused.id))
      assert.include(three.out, "published: not published (the quarantine holds it (QUARANTINED)")
      assert.include(three.out, "quarantined: QUARANTINED")
      assert.include(three.out, "the topic does not exist")

      const missing = yield* withoutBrokerEnv(inspect(randomUUID()))
      assert.isTrue(missing.ok, missing.err)
      assert.include(missing.out, "committed: no")
      assert.include(missing.out, "published: unknown (the event table holds no such event")
      const bad = yield* inspect("not-an-id")
      assert.isFalse(bad.ok)
      assert.include(bad.err, "is not an event id")

      // The broker's word: not there, then there once republished.
      const asked = yield* inspect(pending.id, "--brokers", brokers)
      assert.isTrue(asked.ok, asked.err)
      assert.include(asked.out, "published: not published (the broker holds no record with this event id")
      const sent = yield* f.cli(
        "log",
        "republish",
        "--from",
        new Date(pending.createdAt - 1000).toISOString(),
        "--to",
        new Date(pending.createdAt + 1000).toISOString(),
        "--key",
        "b",
        "--brokers",
        brokers,
        "--execute"
      )
      assert.isTrue(sent.ok, sent.err)
      const found = yield* inspect(pending.id, "--brokers", brokers, "--json")
      assert.isTrue(found.ok, found.err)
      const report = JSON.parse(found.out)
      assert.strictEqual(report.published.answer, "published")
      assert.include(report.published.because, `the broker holds it: ${topic} partition 0 offset 0`)
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 2 })))
  )
})

describe("effect-outbox log republish", () => {
  it.live("a dry run counts and sends nothing; --execute sends exactly the selection, in id order, audited", () =>
    Effect.gen(function* () {
      const [a, b] = [`cli-repub-a-${suffix()}`, `cli-repub-b-${suffix()}`]
      const f = yield* fixture([a, b])
      yield* f.write(a, "k1") // before the window
      yield* Effect.sleep("5 millis")
      const from = new Date()
      yield* Effect.sleep("2 millis")
      const a1 = yield* f.write(a, "k1")
      const a2 = yield* f.write(a, "k2")
      yield* f.write(b, "k1")
      const a3 = yield* f.write(a, "k1")
      yield* Effect.sleep("5 millis")
      const to = new Date()
      yield* Effect.sleep("2 millis")
      yield* f.write(a, "k1") // after the window
      const window = ["--from", from.toISOString(), "--to", to.toISOString(), "--brokers", brokers]

      const dry = yield* f.cli("log", "republish", ...window)
      assert.isTrue(dry.ok, dry.err)
      assert.include(dry.out, `would republish (dry run; add --execute) 4 event(s) from ${from.toISOString()}`)
      assert.include(dry.out, `  ${a}: 3`)
      assert.include(dry.out, `  ${b}: 1`)
      assert.include(dry.out, `first ${a1.id}, last ${a3.id} (id order)`)
      assert.include(dry.out, "duplicates on purpose")
      const keyed = yield* f.cli("log", "republish", ...window, "--topic", a, "--key", "k1", "--json")
      assert.isTrue(keyed.ok, keyed.err)
      assert.deepInclude(JSON.parse(keyed.out), { dryRun: true, count: 2, firstId: a1.id, lastId: a3.id, published: 0 })
      assert.deepStrictEqual(yield* f.onTopic(a), [])
      assert.deepStrictEqual(yield* f.onTopic(b), [])
      assert.deepStrictEqual(f.audit, [])

      const run = yield* f.cli(
        "log",
        "republish",
        ...window,
        "--topic",
        a,
        "--key",
        "k1",
        "--operator",
        "ana",
        "--execute"
      )
      assert.isTrue(run.ok, run.err)
      assert.include(run.out, "republished 2 event(s)")
      assert.deepStrictEqual(yield* f.onTopic(a), [a1.id, a3.id])
      assert.deepStrictEqual(yield* f.onTopic(b), [])
      const line = f.audit.find((l) => l.startsWith("AUDIT outbox log republish by ana: 2 event(s)"))
      assert.isDefined(line, f.audit.join("\n"))
      assert.include(line!, `from ${from.toISOString()} to ${to.toISOString()} (topic ${a}, key k1)`)

      const all = yield* f.cli("log", "republish", ...window, "--topic", a, "--execute")
      assert.isTrue(all.ok, all.err)
      assert.deepStrictEqual(yield* f.onTopic(a), [a1.id, a3.id, a1.id, a2.id, a3.id])
      assert.deepStrictEqual(yield* f.onTopic(b), [])

      // A topic the broker does not have (automatic creation off): refused, said, audited.
      const lost = yield* f.write(`cli-repub-missing-${suffix()}`, "k9")
      const refused = yield* f.cli(
        "log",
        "republish",
        "--from",
        new Date(lost.createdAt - 1000).toISOString(),
        "--to",
        new Date(lost.createdAt + 1000).toISOString(),
        "--key",
        "k9",
        "--brokers",
        brokers,
        "--operator",
        "ana",
        "--execute"
      )
      assert.isFalse(refused.ok)
      assert.include(refused.err, `the broker refused 1 event(s), the first ${lost.id}`)
      assert.isTrue(
        f.audit.some((l) => l.startsWith("AUDIT outbox log republish by ana: 0 event(s)") && l.includes("stopped")),
        f.audit.join("\n")
      )

      const backwards = yield* f.cli("log", "republish", "--from", to.toISOString(), "--to", from.toISOString())
      assert.isFalse(backwards.ok)
      assert.include(backwards.err, "--from must be before --to")
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 2 })))
  )
})
