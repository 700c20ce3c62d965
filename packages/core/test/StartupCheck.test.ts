// The runtime's start-up check on a scripted BrokerAdmin: which topics it needs, what a missing
// one and an unreachable broker fail with, and what auto-creation creates.

import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { BrokerAdmin } from "../src/BrokerAdmin.ts"
import { BrokerAdminError, BrokerSecurityError, BrokerUnreachableError, MissingTopicsError } from "../src/Errors.ts"
import * as StartupCheck from "../src/StartupCheck.ts"

/** An admin over `topics` (name → partitions); `refuse` makes `listTopics` fail that many times. */
const scripted = (topics: Map<string, number>, refuse = 0) => {
  let refusals = refuse
  const admin = BrokerAdmin.of({
    brokers: ["b-1:9092", "b-2:9092"],
    listTopics: Effect.suspend(() =>
      refusals-- > 0
        ? Effect.fail(new BrokerAdminError({ operation: "listTopics", topic: "*", reason: "connect ECONNREFUSED" }))
        : Effect.succeed([...topics.keys()])
    ),
    partitionCount: (topic) => Effect.sync(() => Option.fromUndefinedOr(topics.get(topic))),
    ensureTopic: ({ partitions, topic }) => Effect.sync(() => void topics.set(topic, partitions)),
    growPartitions: () => Effect.die("unused"),
    groupOffsets: () => Effect.die("unused"),
    commitGroupOffsets: () => Effect.die("unused")
  })
  return admin
}

const failure = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined

const declared = [
  { topics: ["orders", "payments"] },
  { topics: ["orders"], deadLetterTopic: (topic: string) => `${topic}-dead` }
]
const defaults = { timeout: Duration.seconds(2), autoCreateTopics: false }

describe("StartupCheck", () => {
  it("requiredTopics: each topic read, then each dead-letter topic, once", () => {
    assert.deepStrictEqual(StartupCheck.requiredTopics(declared), [
      { topic: "orders" },
      { topic: "payments" },
      { topic: "orders.DLT", deadLetterOf: "orders" },
      { topic: "payments.DLT", deadLetterOf: "payments" },
      { topic: "orders-dead", deadLetterOf: "orders" }
    ])
  })

  it.live("every topic missing is named in one MissingTopicsError with the command that creates them", () =>
    Effect.gen(function* () {
      const topics = new Map([
        ["orders", 3],
        ["payments", 1],
        ["orders.DLT", 3]
      ])
      const exit = yield* StartupCheck.run(declared, defaults).pipe(
        Effect.provideService(BrokerAdmin, scripted(topics)),
        Effect.exit
      )
      const error = failure(exit)
      assert.instanceOf(error, MissingTopicsError)
      assert.deepStrictEqual((error as MissingTopicsError).topics, ["payments.DLT", "orders-dead"])
      assert.include(
        (error as MissingTopicsError).message,
        "topics missing on the Kafka brokers b-1:9092,b-2:9092: payments.DLT, orders-dead. " +
          "Create them with `effect-outbox topics ensure payments.DLT orders-dead --execute`"
      )
      assert.isFalse(topics.has("payments.DLT"))
    })
  )

  it.live("autoCreateTopics creates what is missing: a dead-letter topic with its source's partitions", () =>
    Effect.gen(function* () {
      const topics = new Map([["orders", 3]])
      yield* StartupCheck.run(declared, { ...defaults, autoCreateTopics: true }).pipe(
        Effect.provideService(BrokerAdmin, scripted(topics))
      )
      assert.deepStrictEqual(Object.fromEntries(topics), {
        orders: 3,
        payments: 1,
        "orders.DLT": 3,
        "payments.DLT": 1,
        "orders-dead": 3
      })
    })
  )

  it.live(
    "a broker that refuses a while is asked again; one that never answers fails at the timeout with the cause",
    () =>
      Effect.gen(function* () {
        const all = new Map(StartupCheck.requiredTopics(declared).map((t) => [t.topic, 1]))
        yield* StartupCheck.run(declared, defaults).pipe(Effect.provideService(BrokerAdmin, scripted(all, 2)))

        const started = Date.now()
        const exit = yield* StartupCheck.run(declared, { ...defaults, timeout: Duration.millis(600) }).pipe(
          Effect.provideService(BrokerAdmin, scripted(all, Number.MAX_SAFE_INTEGER)),
          Effect.exit
        )
        const elapsed = Date.now() - started
        const error = failure(exit)
        assert.instanceOf(error, BrokerUnreachableError)
        assert.strictEqual(
          (error as BrokerUnreachableError).message,
          "cannot reach the Kafka brokers b-1:9092,b-2:9092 (waited 600 ms): connect ECONNREFUSED. " +
            'Check KAFKA_BROKERS; OUTBOX_BROKER_STARTUP_TIMEOUT sets how long start-up waits ("off" skips the check)'
        )
        assert.isAtLeast(elapsed, 550)
        assert.isBelow(elapsed, 1_500)
      })
  )

  it.live("brokers that refuse the credentials stop the check at their first answer, naming what to check", () =>
    Effect.gen(function* () {
      let asked = 0
      const refusing = BrokerAdmin.of({
        ...scripted(new Map()),
        listTopics: Effect.suspend(() => {
          asked++
          return Effect.fail(
            new BrokerAdminError({
              operation: "listTopics",
              topic: "*",
              reason: "SASL authentication failed",
              kind: "permanent",
              security: "authentication"
            })
          )
        })
      })
      const started = Date.now()
      const exit = yield* StartupCheck.run(declared, { ...defaults, timeout: Duration.seconds(10) }).pipe(
        Effect.provideService(BrokerAdmin, refusing),
        Effect.exit
      )
      const error = failure(exit)
      assert.instanceOf(error, BrokerSecurityError)
      assert.strictEqual(asked, 1)
      assert.isBelow(Date.now() - started, 1_000)
      assert.strictEqual(
        (error as BrokerSecurityError).message,
        "the Kafka brokers b-1:9092,b-2:9092 refused the credentials: SASL authentication failed. " +
          "Check KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or the token provider)"
      )
    })
  )

  it.live("timeout false, or an admin without listTopics, checks nothing", () =>
    Effect.gen(function* () {
      const empty = new Map<string, number>()
      yield* StartupCheck.run(declared, { ...defaults, timeout: false }).pipe(
        Effect.provideService(BrokerAdmin, scripted(empty))
      )
      const { listTopics: _, ...withoutList } = scripted(empty)
      yield* StartupCheck.run(declared, defaults).pipe(Effect.provideService(BrokerAdmin, BrokerAdmin.of(withoutList)))
      yield* StartupCheck.run(declared, defaults)
    })
  )
})
