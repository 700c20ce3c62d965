/**
 * The runtime's health server against the real services: a runtime on a private PostgreSQL (so
 * the test may stop it) and the shared Kafka, with one relay and one consumer, serves `/healthz`
 * and `/readyz` over HTTP. Ready with every check passing; not ready, and saying the database is
 * why, while PostgreSQL is stopped, yet still live; ready again once it is back; gone once the
 * runtime is closed. And on a private broker it freezes (SIGSTOP): not ready, blaming the broker,
 * still live, ready again once it thaws.
 */

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Topic from "@effect-outbox/core/Topic"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { afterAll, assert, describe, it } from "vitest"
import * as Support from "./support.js"

const pg = Support.privatePostgres({
  port: Support.privatePort("HEALTH_PG_PORT", 25470),
  state: process.env.HEALTH_PG_STATE ?? "/tmp/wt-deploy-guard-pg"
})

interface Probe {
  readonly status: number
  readonly body: {
    readonly status: string
    readonly checks: ReadonlyArray<{ name: string; ok: boolean; detail: string }>
  }
}

const probe = async (port: number, path: string): Promise<Probe> => {
  const response = await fetch(`http://127.0.0.1:${port}${path}`)
  return { status: response.status, body: (await response.json()) as Probe["body"] }
}

const check = (p: Probe, name: string) => p.body.checks.find((c) => c.name === name)

/** Polls `read` until `done` holds (a generous deadline: the machine is shared). */
const until = async <A>(read: () => Promise<A>, done: (a: A) => boolean, timeoutMs = 30_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() > deadline) return value
    await Support.sleep(200)
  }
}

const broker = Support.privateBroker({
  port: Support.privatePort("HEALTH_KAFKA_PORT", 25471),
  controllerPort: Support.privatePort("HEALTH_KAFKA_CONTROLLER_PORT", 25472),
  state: process.env.HEALTH_KAFKA_STATE ?? "/tmp/wt-deploy-guard-kafka"
})

describe("health probes on the real services", () => {
  afterAll(async () => {
    await pg.down()
    Support.signalBroker(broker.state, "SIGCONT")
    await broker.down()
  })

  it("ready with every check passing; not ready (database) but live while PostgreSQL is down; ready again after", async () => {
    await pg.up()
    const runId = randomUUID().replaceAll("-", "").slice(0, 10)
    const Orders = Topic.make({
      name: `health-${runId}.orders`,
      schema: Schema.Struct({ orderId: Schema.String }),
      key: (o) => o.orderId
    })
    const groupId = `health-${runId}`
    const kafka = KafkaOutbox.layer({ brokers: Support.sharedBrokers, clientId: "health-test" })
    await Effect.runPromise(
      BrokerAdmin.use((admin) =>
        Effect.andThen(
          admin.ensureTopic({ topic: Orders.name, partitions: 1 }),
          admin.ensureTopic({ topic: Orders.deadLetterTopic, partitions: 1 })
        )
      ).pipe(Effect.provide(kafka))
    )
    const storage = PgOutbox.layer({ schema: `health_${runId}` }).pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(pg.url), maxConnections: 3 }))
    )
    const runtime = OutboxRuntime.layer({
      relay: { instances: 1, pollInterval: Duration.millis(200) },
      consumers: [OutboxRuntime.consumer(Topic.consumer(Orders, { groupId, handler: () => Effect.void }))],
      health: { port: 0, host: "127.0.0.1", timeout: Duration.seconds(2) }
    }).pipe(Layer.provideMerge(Layer.merge(storage, kafka)))
    const scope = Scope.makeUnsafe()
    const context = await Effect.runPromise(
      Layer.buildWithScope(runtime, scope).pipe(Effect.provideService(Logger.CurrentLoggers, new Set()))
    )
    let closed = false
    try {
      const info = await Effect.runPromise(Effect.provideContext(Effect.service(OutboxRuntime.OutboxRuntime), context))
      const port = info.healthPort!
      assert.isAbove(port, 0)

      const ready = await probe(port, "/readyz")
      assert.strictEqual(ready.status, 200, JSON.stringify(ready.body))
      assert.strictEqual(ready.body.status, "ok")
      assert.isTrue(check(ready, "database")?.ok)
      assert.match(check(ready, "broker")?.detail ?? "", /^answers/)
      assert.strictEqual(check(ready, `relay ${info.relays[0]}`)?.detail, "running")
      assert.strictEqual(check(ready, `consumer ${groupId}`)?.detail, "running")
      assert.strictEqual((await probe(port, "/healthz")).status, 200)
      assert.strictEqual((await probe(port, "/health/live")).status, 200)
      assert.strictEqual((await probe(port, "/health/ready")).status, 200)

      await pg.stop()
      const stopped = Date.now()
      const down = await until(
        () => probe(port, "/readyz"),
        (p) => p.status === 503
      )
      assert.strictEqual(down.status, 503, JSON.stringify(down.body))
      assert.isAtMost(Date.now() - stopped, 15_000, "unready within 15 s of the database stopping")
      assert.strictEqual(down.body.status, "unavailable")
      assert.isFalse(check(down, "database")?.ok)
      assert.isTrue(check(down, "broker")?.ok, "only the database is blamed")
      assert.strictEqual((await probe(port, "/health/ready")).status, 503)
      const live = await probe(port, "/healthz")
      assert.strictEqual(live.status, 200, "an outage the runtime rides out is no reason to restart it")

      await pg.start()
      const back = await until(
        () => probe(port, "/readyz"),
        (p) => p.status === 200
      )
      assert.strictEqual(back.status, 200, JSON.stringify(back.body))

      await Effect.runPromise(Scope.close(scope, Exit.void))
      closed = true
      const gone = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => "answered",
        () => "refused"
      )
      assert.strictEqual(gone, "refused", "the health server closes with the runtime")
    } finally {
      if (!closed) await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 120_000)

  it("not ready (broker) within 15 s of the broker freezing, live all along; ready again once it answers", async () => {
    await pg.up()
    await broker.down()
    await broker.up()
    const runId = randomUUID().replaceAll("-", "").slice(0, 10)
    const kafka = KafkaOutbox.layer({ brokers: broker.brokers, clientId: "health-broker-test" })
    const storage = PgOutbox.layer({ schema: `health_b_${runId}` }).pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(pg.url), maxConnections: 3 }))
    )
    const runtime = OutboxRuntime.layer({
      relay: { instances: 1, pollInterval: Duration.millis(200) },
      health: { port: 0, host: "127.0.0.1", timeout: Duration.seconds(2) }
    }).pipe(Layer.provideMerge(Layer.merge(storage, kafka)))
    const scope = Scope.makeUnsafe()
    const context = await Effect.runPromise(
      Layer.buildWithScope(runtime, scope).pipe(Effect.provideService(Logger.CurrentLoggers, new Set()))
    )
    try {
      const info = await Effect.runPromise(Effect.provideContext(Effect.service(OutboxRuntime.OutboxRuntime), context))
      const port = info.healthPort!
      const ready = await until(
        () => probe(port, "/readyz"),
        (p) => p.status === 200
      )
      assert.strictEqual(ready.status, 200, JSON.stringify(ready.body))
      assert.strictEqual(Support.signalBroker(broker.state, "SIGSTOP"), 1)
      const frozen = Date.now()
      const down = await until(
        () => probe(port, "/readyz"),
        (p) => p.status === 503
      )
      assert.strictEqual(down.status, 503, JSON.stringify(down.body))
      assert.isAtMost(Date.now() - frozen, 15_000, "unready within 15 s of the broker stopping")
      assert.isFalse(check(down, "broker")?.ok)
      assert.isTrue(check(down, "database")?.ok, "only the broker is blamed")
      assert.strictEqual((await probe(port, "/healthz")).status, 200)
      Support.signalBroker(broker.state, "SIGCONT")
      const back = await until(
        () => probe(port, "/readyz"),
        (p) => p.status === 200,
        60_000
      )
      assert.strictEqual(back.status, 200, JSON.stringify(back.body))
    } finally {
      Support.signalBroker(broker.state, "SIGCONT")
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 300_000)
})
