// Issue #16: the broker-outage scenario of RelayOutage.faults.test.ts with the relay publishing
// through the @platformatic/kafka adapter (PlatformaticKafkaOutbox), every library setting at its
// default. Records a row of the faults table.
//
// The private broker takes its ports from FAULTS_KAFKA_PORT / FAULTS_KAFKA_CONTROLLER_PORT and
// its state directory from TMPDIR, so parallel runs on one machine do not collide.

import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests (@platformatic/kafka adapter)\n${Support.table()}\n`)
})

const privateBroker = () =>
  Support.privateBroker({
    port: Support.privatePort("FAULTS_KAFKA_PORT", 19092),
    controllerPort: Support.privatePort("FAULTS_KAFKA_CONTROLLER_PORT", 19093),
    state: join(tmpdir(), "effect-outbox-platformatic-outage-broker")
  })

/** `Support.defaultsStackLayer` with the Kafka ports on @platformatic/kafka: the one-line swap. */
const platformaticStack = async (options: { readonly schema: string; readonly brokers: ReadonlyArray<string> }) => {
  const client = PgClient.layer({
    url: Redacted.make(Support.databaseUrl),
    maxConnections: 4,
    applicationName: "effect-outbox-faults"
  })
  const pg = PgOutbox.layer({ schema: options.schema }).pipe(Layer.provideMerge(client))
  const broker = PlatformaticKafkaOutbox.layer({ brokers: options.brokers, clientId: "faults" })
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.FAULTS_LOG_LEVEL ?? "Error") as LogLevel.LogLevel
  )
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(Outbox.layer, Inbox.Inbox.layer).pipe(
      Layer.provideMerge(Layer.merge(pg, broker)),
      Layer.provideMerge(logLevel)
    )
  )
  await runtime.runPromise(Effect.void)
  return runtime as unknown as Support.Stack
}

const counter = (stack: Support.Stack, message: string) => async (where: string) =>
  (await Support.query<{ n: number }>(stack, `SELECT count(*)::int AS n FROM ${message} WHERE ${where}`))[0]!.n

const statusCounts = async (stack: Support.Stack, message: string) =>
  JSON.stringify(
    await Support.query(
      stack,
      `SELECT status, count(*)::int AS n, max(attempts) AS attempts FROM ${message} GROUP BY 1`
    )
  )

const failureReasons = async (stack: Support.Stack, message: string) =>
  JSON.stringify(
    await Support.query(
      stack,
      `SELECT last_error, attempts, count(*)::int AS n FROM ${message} WHERE status = 'FAILURE' GROUP BY 1, 2`
    )
  )

describe("@platformatic/kafka adapter: the broker down for 40 s while 100 keys stream", () => {
  it("no FAILURE, nothing lost, per-key order kept, no attempt spent on the outage", async () => {
    const broker = privateBroker()
    await broker.down()
    rmSync(broker.state, { recursive: true, force: true })
    await broker.up()
    const schema = Support.uniqueName("faults_platformatic_outage")
    const topic = Support.uniqueName("faults-platformatic-outage")
    let stack: Support.Stack | undefined
    let stopRelay: (() => Promise<void>) | undefined
    try {
      await Support.createTopics(broker.brokers, [topic])
      stack = await platformaticStack({ schema, brokers: broker.brokers })
      const s = stack
      const t = await Support.tables(s)
      const count = counter(s, t.message)
      stopRelay = await Support.startRelay(s)

      // 100 events/s over 100 keys for 55 s; the broker is down from 5 s to 45 s.
      const outageMillis = 40_000
      const ids: Array<string> = []
      const started = Date.now()
      let downAt: number | undefined
      let upAt: number | undefined
      let peakBacklog = 0
      const outage = (async () => {
        await Support.sleep(5_000)
        await broker.down()
        downAt = Date.now()
        await Support.sleep(outageMillis)
        await broker.up()
        upAt = Date.now()
      })()
      while (Date.now() - started < 55_000 || upAt === undefined) {
        ids.push(...(await Support.enqueueMany(s, topic, 25, { keys: 100, from: ids.length, chunk: 25 })))
        if (downAt !== undefined && upAt === undefined)
          peakBacklog = Math.max(peakBacklog, await count("status IN ('PENDING','DISPATCHING')"))
        await Support.sleep(250)
      }
      await outage
      const deadline = Date.now() + 150_000
      while ((await count("status IN ('PENDING','DISPATCHING')")) > 0) {
        if (Date.now() > deadline) {
          console.error(`P1 not drained: ${await statusCounts(s, t.message)}; ${await failureReasons(s, t.message)}`)
          throw new Error(
            `the outbox did not drain within 150 s of the broker's return: ${await statusCounts(s, t.message)}; ` +
              `FAILURE: ${await failureReasons(s, t.message)}`
          )
        }
        await Support.sleep(200)
      }
      const drainedAt = Date.now()
      await stopRelay()

      const failed = await count("status = 'FAILURE'")
      if (failed > 0) console.error(`P1 FAILURE rows: ${await failureReasons(s, t.message)}`)
      const maxSeenAttempts = (
        await Support.query<{ n: number }>(s, `SELECT COALESCE(max(attempts), 0)::int AS n FROM ${t.message}`)
      )[0]!.n
      const records = await Support.readTopic(broker.brokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % 100}` })),
        records
      )
      Support.record({
        scenario: "P1 broker down 40 s, 100 keys (relay on @platformatic/kafka)",
        ...v,
        failureRows: failed,
        note:
          `outage ${((upAt! - downAt!) / 1000).toFixed(0)} s; peak backlog ${peakBacklog}; ` +
          `max attempts on a row ${maxSeenAttempts}; drained ${((drainedAt - upAt!) / 1000).toFixed(1)} s after restart`
      })
      assert.strictEqual(failed, 0, `no row ends in FAILURE; got ${await failureReasons(s, t.message)}`)
      assert.isAbove(peakBacklog, 500, "the outbox accumulated while the broker was down")
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(await count("status = 'PUBLISHED'"), ids.length)
    } finally {
      await stopRelay?.()
      if (stack !== undefined) {
        await Support.dropSchema(stack, schema)
        await stack.dispose()
      }
      await broker.down().catch(() => undefined)
      rmSync(broker.state, { recursive: true, force: true })
    }
  })
})
