// `effect-outbox dlt discard` and `dlt history` against the real Kafka, through the real command
// parser: a discard is a dry run unless --execute, refuses bad input (no letter, a malformed place,
// a place without a letter, no reason) before recording anything, and once executed is on the
// audit topic and leaves the dead-letter depth; the history reads the audit topic back, newest
// first. Fresh topics per test.

import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"
import { brokers, deleteTopics, poisonLetters } from "./support/kafka.ts"

/** A topic and its dead-letter topic holding three letters at 0/0, 0/1, 0/2; the CLI on them. */
const fixture = Effect.gen(function* () {
  const topic = `cli-dlta-${randomUUID().slice(0, 8)}`
  const dlt = `${topic}.DLT`
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => deleteTopics([topic, dlt, `${dlt}.audit`]).catch(() => undefined))
  )
  const kafka = yield* Layer.buildWithScope(
    KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-dlt-audit-test" }),
    yield* Effect.scope
  )
  type Kafka = typeof kafka extends Context.Context<infer R> ? R : never
  const inKafka = <A, E>(effect: Effect.Effect<A, E, Kafka>) => Effect.provideContext(effect, kafka)
  yield* inKafka(
    BrokerAdmin.use((admin) =>
      Effect.andThen(admin.ensureTopic({ topic, partitions: 1 }), admin.ensureTopic({ topic: dlt, partitions: 1 }))
    )
  )
  const ids = [0, 1, 2].map((i) => `0190a0a0-0000-7000-8000-00000000002${i}` as EventId)
  const letters = yield* poisonLetters(topic, dlt, ids)
  yield* inKafka(Publisher.use((p) => p.publish(letters)))
  const logs: Array<string> = []
  const logger = Logger.make(
    ({ message }) => void logs.push(Array.isArray(message) ? message.join(" ") : String(message))
  )
  /** Runs the CLI; answers its standard output and its failure, if any. */
  const cli = (...args: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Cli.run(["--brokers", brokers, ...args]))
      const out = (yield* TestConsole.logLines).map(String).join("\n")
      const err = (yield* TestConsole.errorLines).map(String).join("\n")
      return { ok: exit._tag === "Success", out, err }
    }).pipe(
      Effect.provide(TestConsole.layer),
      Effect.provide(NodeServices.layer),
      Effect.provideService(Logger.CurrentLoggers, new Set([logger]))
    )
  /** Dead letters still waiting for a replay or a discard. */
  const pending = inKafka(Effect.map(DeadLetterDepth.sample(dlt), (depth) => Option.getOrThrow(depth).pending))
  return { dlt, ids, cli, logs, pending }
})

describe("effect-outbox dlt replay, discard and history", () => {
  it.live("bad input fails with a clear error and records nothing", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const list = yield* f.cli("dlt", "list", f.dlt)
      assert.isTrue(list.ok, list.err)
      assert.match(list.out, /^letter\s/m, "dlt list shows each letter's place")
      assert.match(list.out, new RegExp(`^0/1\\s+${f.ids[1]}`, "m"))

      const none = yield* f.cli("dlt", "discard", f.dlt, "--reason", "dup", "--execute")
      assert.isFalse(none.ok)
      assert.include(none.err, "name the dead letters")
      const malformed = yield* f.cli("dlt", "discard", f.dlt, "--letter", "0:1", "--reason", "dup", "--execute")
      assert.isFalse(malformed.ok)
      assert.include(malformed.err, `"0:1" is not a dead letter's place`)
      const noReason = yield* f.cli("dlt", "discard", f.dlt, "--letter", "0/1", "--execute")
      assert.isFalse(noReason.ok)
      assert.include(noReason.err, "--reason is required")
      // One of the two places holds no letter: neither is discarded.
      const unknown = yield* f.cli(
        "dlt",
        "discard",
        f.dlt,
        "--letter",
        "0/1",
        "--letter",
        "0/99",
        "--reason",
        "dup",
        "--execute"
      )
      assert.isFalse(unknown.ok)
      assert.include(unknown.err, `no dead letter at 0/99 on ${f.dlt}`)
      const badLimit = yield* f.cli("dlt", "history", f.dlt, "--limit", "0")
      assert.isFalse(badLimit.ok)
      assert.include(badLimit.err, "--limit 0")

      const history = yield* f.cli("dlt", "history", f.dlt)
      assert.isTrue(history.ok, history.err)
      assert.include(history.out, "no replay or discard")
      assert.strictEqual(yield* f.pending, 3)
      assert.isFalse(f.logs.some((line) => line.includes("AUDIT")))
    }).pipe(Effect.scoped)
  )

  it.live(
    "a discard is a dry run unless --execute; executed it is audited, leaves the depth and is in the history",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const dry = yield* f.cli("dlt", "discard", f.dlt, "--letter", "0/1", "--reason", "duplicate order")
        assert.isTrue(dry.ok, dry.err)
        assert.include(dry.out, "dry run: 1 dead letter(s) would be discarded")
        assert.include(dry.out, f.ids[1]!)
        assert.include((yield* f.cli("dlt", "history", f.dlt)).out, "no replay or discard")
        assert.strictEqual(yield* f.pending, 3)

        const done = yield* f.cli(
          "dlt",
          "discard",
          f.dlt,
          "--letter",
          "0/1",
          "--operator",
          "alice",
          "--reason",
          "duplicate order",
          "--execute"
        )
        assert.isTrue(done.ok, done.err)
        assert.include(done.out, `discarded 1 dead letter(s) of ${f.dlt}`)
        assert.isTrue(
          f.logs.some((line) => line.includes(`AUDIT outbox dlt discard by alice: 1 dead letter(s) from ${f.dlt}`)),
          f.logs.join("\n")
        )
        // Handled out of order: the depth counts from the first letter still waiting (0/0), and
        // once that one is handled too both leave it.
        assert.strictEqual(yield* f.pending, 3)
        const second = yield* f.cli(
          "dlt",
          "discard",
          f.dlt,
          "--letter",
          "0/0",
          "--operator",
          "bob",
          "--reason",
          "test",
          "--execute"
        )
        assert.isTrue(second.ok, second.err)
        assert.strictEqual(yield* f.pending, 1)

        const history = yield* f.cli("dlt", "history", f.dlt)
        assert.isTrue(history.ok, history.err)
        const rows = history.out.split("\n").slice(1)
        assert.strictEqual(rows.length, 2, history.out)
        assert.match(rows[0]!, /discard\s+0\/0\s+.*bob\s+test$/, "newest first")
        assert.match(rows[1]!, new RegExp(`discard\\s+0/1\\s+${f.ids[1]}\\s+Error\\s+alice\\s+duplicate order$`))
        const latest = JSON.parse((yield* f.cli("dlt", "history", f.dlt, "--limit", "1", "--json")).out)
        assert.strictEqual(latest.length, 1)
        assert.deepInclude(latest[0], {
          action: "discard",
          deadLetterTopic: f.dlt,
          partition: 0,
          offset: "0",
          eventId: f.ids[0],
          operator: "bob",
          reason: "test"
        })
      }).pipe(Effect.scoped)
  )

  it.live("an executed replay is recorded in the history and leaves the depth; a dry run is not", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const dry = yield* f.cli("dlt", "replay", f.dlt, "--event-id", f.ids[0]!)
      assert.isTrue(dry.ok, dry.err)
      assert.include((yield* f.cli("dlt", "history", f.dlt)).out, "no replay or discard")
      assert.strictEqual(yield* f.pending, 3)

      const done = yield* f.cli(
        "dlt",
        "replay",
        f.dlt,
        "--event-id",
        f.ids[0]!,
        "--operator",
        "carol",
        "--reason",
        "handler fixed",
        "--execute"
      )
      assert.isTrue(done.ok, done.err)
      assert.strictEqual(yield* f.pending, 2)
      const history = JSON.parse((yield* f.cli("dlt", "history", f.dlt, "--json")).out)
      assert.strictEqual(history.length, 1)
      assert.deepInclude(history[0], {
        action: "replay",
        deadLetterTopic: f.dlt,
        partition: 0,
        offset: "0",
        eventId: f.ids[0],
        operator: "carol",
        reason: "handler fixed"
      })
    }).pipe(Effect.scoped)
  )
})
