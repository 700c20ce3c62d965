// The overview says when no relay is running, on the real PostgreSQL and Kafka: a running relay
// writes a heartbeat the read model sees, and it lapses when the relay stops; 15 events pending
// for 12 minutes with no live heartbeat turn the page red with "No relay is running"; with a live
// heartbeat the same backlog is orange (relays run but do not get through); a young backlog is
// neither. The red page is also checked in chromium (the sentence on top, on red). The page's
// health list and `effect-outbox status` give the same verdicts: the relays check fails while the
// backlog waits, the others pass.

import { randomUUID } from "node:crypto"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { ReadModel } from "@effect-outbox/core/ReadModel"
import * as Relay from "@effect-outbox/core/Relay"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { chromium } from "playwright-core"
import { assert, describe, it } from "vitest"
import * as Dashboard from "../src/Dashboard.ts"
import * as Operations from "../src/Operations.ts"
import * as Render from "../src/Render.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092"
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const screenshotPath = join(tmpdir(), "effect-outbox-dashboard-no-relay.png")

const start = async () => {
  const schema = `dashr_${randomUUID().replaceAll("-", "").slice(0, 20)}`
  const services = Outbox.layerWith({}).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema, wakeUp: { listen: false } })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 })),
    Layer.provideMerge(KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "dashboard-relays-test" }))
  )
  const scope = Scope.makeUnsafe()
  const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Logger.CurrentLoggers, new Set<Logger.Logger<unknown, unknown>>()))
  const context = await Effect.runPromise(
    quiet(Layer.buildWithScope(Dashboard.layer({ refresh: "1 second" }).pipe(Layer.provideMerge(services)), scope))
  )
  type Services = typeof context extends Context.Context<infer R> ? R : never
  const run = <A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> =>
    Effect.runPromise(quiet(Effect.provideContext(effect, context)))
  const url = await run(Dashboard.url())
  const close = async () => {
    await run(
      Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  return { schema, url, run, close }
}

const overview = (url: string) =>
  new Promise<string>((resolve, reject) => {
    http
      .get(`${url}/`, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
      })
      .on("error", reject)
  })

const relaysOf = ReadModel.use((readModel) => readModel.relays!)

describe("the overview and relay liveness", () => {
  it("a relay's heartbeat is seen while it runs and lapses when it stops", async () => {
    const d = await start()
    try {
      const relayScope = Scope.makeUnsafe()
      const relay = await d.run(Scope.provide(Relay.start({}), relayScope))
      // The first beat is written by the relay's own fiber: wait for it.
      let running = await d.run(relaysOf)
      for (let i = 0; i < 100 && !running.some((r) => r.owner === relay.owner); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        running = await d.run(relaysOf)
      }
      assert.deepInclude(
        running.map((r) => ({ owner: r.owner, alive: r.alive })),
        { owner: relay.owner, alive: true }
      )
      await Effect.runPromise(Scope.close(relayScope, Exit.void))
      const stopped = await d.run(relaysOf)
      assert.deepInclude(
        stopped.map((r) => ({ owner: r.owner, alive: r.alive })),
        { owner: relay.owner, alive: false }
      )
    } finally {
      await d.close()
    }
  })

  it("15 events pending for 12 minutes: red 'No relay is running' without a live heartbeat, orange with one", async () => {
    const d = await start()
    try {
      const topic = `dashr-${randomUUID().slice(0, 8)}`
      await d.run(
        Effect.forEach(
          Array.from({ length: 15 }, (_, n) => n),
          (n) => Outbox.enqueueAutocommit({ topic, key: `k${n}`, payload: jsonPayload({ n }) })
        )
      )
      // A young backlog is neither orange nor red.
      const young = await overview(d.url)
      assert.include(young, `data-health="ok"`)
      assert.include(young, `data-check="relays" data-ok="true"`)
      assert.notInclude(young, `data-relays="alert"`)
      assert.notInclude(young, `data-relays="warn"`)
      assert.include(young, "No relay is running.")

      await d.run(
        Effect.flatMap(
          Effect.service(SqlClient.SqlClient),
          (sql) =>
            sql.unsafe(`UPDATE "${d.schema}".outbox_message SET created_at = now() - interval '12 minutes'`).unprepared
        )
      )
      const red = await overview(d.url)
      // In a real browser: the sentence is at the top of the page, on red.
      const browser = await chromium.launch({ executablePath, args: ["--headless", "--no-sandbox", "--disable-gpu"] })
      try {
        const page = await browser.newPage()
        // The page as served (no live re-rendering under the assertions).
        await page.route("**/events", (route) => route.abort())
        await page.goto(`${d.url}/`)
        const banner = page.locator("[data-relays]")
        assert.match((await banner.textContent()) ?? "", /^No relay is running: 15 event\(s\) pending/)
        assert.strictEqual(
          await banner.evaluate(
            (el) =>
              (
                globalThis as unknown as { getComputedStyle: (e: typeof el) => { backgroundColor: string } }
              ).getComputedStyle(el).backgroundColor
          ),
          "rgb(192, 57, 43)"
        )
        assert.isTrue(await banner.isVisible())
        await page.screenshot({ path: screenshotPath, fullPage: true })
      } finally {
        await browser.close()
      }
      assert.include(red, `data-relays="alert"`)
      assert.match(
        red,
        /No relay is running: 15 event\(s\) pending, the oldest for 12\.\d min, and no relay has ever reported/
      )
      assert.match(red, /<div class="card alert"><span>PENDING<\/span><b data-count="PENDING">15<\/b>/)
      assert.include(red, `data-health="failing"`)
      assert.include(red, `data-check="relays" data-ok="false"`)
      assert.include(red, `data-check="database" data-ok="true"`)
      assert.include(red, `data-check="broker" data-ok="true"`)
      assert.include(red, `data-check="consumers" data-ok="true"`)

      // `effect-outbox status` says the same.
      const printed = Render.status(await d.run(Operations.status({})))
      assert.include(printed, "relays: none running (no relay has reported)")
      assert.include(printed, "health: FAILING")
      assert.match(printed, /\n {2}FAILING relays: No relay is running: 15 event\(s\) pending/)
      assert.match(printed, /\n {2}ok {6}database: answers/)
      assert.match(printed, /\n {2}ok {6}blocked keys: none/)

      await d.run(OutboxStore.use((store) => store.relayHeartbeat!({ owner: "relay-elsewhere", ttlMillis: 30_000 })))
      assert.include(Render.status(await d.run(Operations.status({}))), "relays: 1 running (relay-elsewhere)")
      const orange = await overview(d.url)
      assert.include(orange, `data-relays="warn"`)
      assert.include(orange, "although 1 relay(s) run")
      assert.match(orange, /<div class="card warn"><span>PENDING<\/span>/)

      // The relay stops: its heartbeat lapses at once, and the page is red again, naming it.
      await d.run(OutboxStore.use((store) => store.relayHeartbeat!({ owner: "relay-elsewhere", ttlMillis: 0 })))
      const again = await overview(d.url)
      assert.include(again, `data-relays="alert"`)
      assert.include(again, "the last relay heartbeat (relay-elsewhere) lapsed")
    } finally {
      await d.close()
    }
  })
})
