// The operator dashboard in a real browser (Debian's chromium driven by playwright-core) against
// the real PostgreSQL and Kafka: a fresh schema per test, rows put in place through the library's
// own API, and every check made on what the page shows and what the database then holds.

import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Outbox from "@effect-outbox/core/Outbox"
import { type EventId, jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Transition from "@effect-outbox/core/Transition"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import * as Dashboard from "../src/Dashboard.ts"
import { brokers, deleteTopics, poisonLetters } from "./support/kafka.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
// The overview's screenshot; `DASHBOARD_SCREENSHOT=docs/dashboard.png` refreshes the one the docs show.
const screenshotPath = process.env.DASHBOARD_SCREENSHOT ?? join(tmpdir(), "effect-outbox-dashboard.png")

let browser: Browser
beforeAll(async () => {
  browser = await chromium.launch({
    executablePath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
})
afterAll(async () => {
  await browser?.close()
})

/** A fresh schema, the library's services on it and Kafka, and a dashboard serving them on a free port. */
const start = async (options: Dashboard.Options = {}) => {
  const schema = `dash_${randomUUID().replaceAll("-", "").slice(0, 20)}`
  const logs: Array<string> = []
  const logger = Logger.make(
    ({ message }) => void logs.push(Array.isArray(message) ? message.join(" ") : String(message))
  )
  const services = Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema, store: { recordTransitions: true }, wakeUp: { listen: false } })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 })),
    Layer.provideMerge(KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "dashboard-test" }))
  )
  const scope = Scope.makeUnsafe()
  const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(
      Effect.provideService(Logger.CurrentLoggers, new Set([logger])),
      Effect.provideService(References.MinimumLogLevel, "Warn")
    )
  const context = await Effect.runPromise(
    quiet(
      Layer.buildWithScope(
        Dashboard.layer({ refresh: "1 second", ...options }).pipe(Layer.provideMerge(services)),
        scope
      )
    )
  )
  const run = <A, E>(effect: Effect.Effect<A, E, any>): Promise<A> =>
    Effect.runPromise(quiet(Effect.provideContext(effect, context)) as Effect.Effect<A, E>)
  const url = await run(Dashboard.url())
  const page = await browser.newPage()
  const close = async () => {
    await page.close()
    await run(
      Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  return { schema, url, run, page, logs, close }
}

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

const statusOf = (id: EventId) =>
  OutboxStore.use((store) => store.get(id)).pipe(Effect.map((row) => Option.getOrThrow(row).status))

const text = async (page: Page, selector: string) => (await page.locator(selector).first().textContent())?.trim()

/** Waits until `check` passes (a generous deadline: the machine is shared). */
const eventually = async (check: () => Promise<void>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await check()
    } catch (error) {
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
}

describe("effect-outbox dashboard (chromium)", () => {
  it("the overview shows the right counts, and updates live as rows arrive and publish; a row shows its receipt", async () => {
    const d = await start()
    try {
      const topic = `dash-orders-${randomUUID().slice(0, 8)}`
      await d.run(failed(`${topic}-pay`, [1, 2]))
      await d.run(Effect.forEach([3, 4, 5], (n) => enqueue(topic, n)))
      await d.run(enqueue(topic, 6, { prequeued: true }))

      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-count="FAILURE"]`), "2")
      assert.strictEqual(await text(d.page, `[data-count="PENDING"]`), "3")
      assert.strictEqual(await text(d.page, `[data-count="PREQUEUED"]`), "1")
      assert.strictEqual(await text(d.page, `[data-metric="total"]`), "6")
      assert.strictEqual(await text(d.page, `[data-metric="blocked-keys"]`), "2")
      assert.strictEqual(await text(d.page, `[data-topic="${topic}"][data-status="PENDING"]`), "3")
      assert.strictEqual(await text(d.page, `[data-topic="${topic}-pay"][data-status="FAILURE"]`), "2")
      assert.notStrictEqual(await text(d.page, `[data-metric="oldest-pending"]`), "none")
      assert.strictEqual(await d.page.locator("svg[aria-label='backlog and publish rate']").count(), 1)

      // Live: a new row shows up without a reload.
      await d.run(enqueue(topic, 7))
      await eventually(async () => {
        assert.strictEqual(await text(d.page, `[data-count="PENDING"]`), "4")
        assert.strictEqual(await text(d.page, "#live"), "live")
      })
      // A relay publishes three of them: the counts and the chart's publish rate follow, live.
      const claimed = await d.run(
        Transition.claim({ owner: "relay-y", limit: 100, maxPerKey: 100, leaseMillis: 60_000 })
      )
      const published = claimed.slice(0, 3)
      await d.run(
        Transition.markPublished(
          published.map((row, i) => ({ id: row.id, receipt: { topic, partition: 0, offset: String(40 + i) } }))
        )
      )
      await eventually(async () => {
        assert.strictEqual(await text(d.page, `[data-count="PUBLISHED"]`), "3")
        assert.strictEqual(await text(d.page, `[data-count="DISPATCHING"]`), String(claimed.length - 3))
        assert.notInclude(await text(d.page, ".chart figcaption"), "publishing 0.0/s")
      })
      await d.page.setViewportSize({ width: 1280, height: 900 })
      await d.page.screenshot({ path: screenshotPath, fullPage: true })

      // A row: its fields and its receipt.
      await d.page.goto(`${d.url}/rows/${published[0]!.id}`)
      assert.strictEqual(await text(d.page, `[data-field="status"]`), "PUBLISHED")
      assert.include(await text(d.page, `[data-field="receipt"]`), `"offset":"40"`)
      assert.include(await d.page.locator("[data-history]").textContent(), "DISPATCHING")
    } finally {
      await d.close()
    }
  })

  it("a requeue is a dry run until confirmed, then changes the row and writes its audit line", async () => {
    const d = await start()
    try {
      const topic = `dash-requeue-${randomUUID().slice(0, 8)}`
      const [id] = await d.run(failed(topic, [1]))
      await d.page.goto(`${d.url}/rows/${id}`)
      assert.strictEqual(await text(d.page, `[data-field="status"]`), "FAILURE")
      await d.page.getByRole("link", { name: "Requeue this row" }).click()
      await d.page.getByLabel("Operator").fill("alice")
      await d.page.getByLabel("Reason").fill("broker limit raised")
      await d.page.getByRole("button", { name: "Dry run" }).click()

      // The dry run lists the row and changes nothing.
      assert.isNotNull(await d.page.locator("[data-dry-run]").textContent())
      assert.strictEqual(await d.page.locator(`[data-selected] a[href$="/rows/${id}"]`).count(), 1)
      assert.strictEqual(await d.run(statusOf(id!)), "FAILURE")

      await d.page.getByRole("button", { name: /Confirm: requeue 1 row/ }).click()
      assert.include(await text(d.page, "[data-result]"), "1 of 1 selected row(s) changed")
      assert.strictEqual(await d.run(statusOf(id!)), "PENDING")
      // Core's audit line names the operator and the reason; the dashboard's own line too.
      assert.isTrue(
        d.logs.some((l) =>
          l.includes("AUDIT outbox requeue by alice: 1/1 FAILURE rows -> PENDING (broker limit raised)")
        ),
        d.logs.join("\n")
      )
      await d.page.goto(`${d.url}/repairs`)
      assert.include(await text(d.page, "[data-audit]"), "requeue by alice (broker limit raised)")
      // The history records the requeue.
      await d.page.goto(`${d.url}/rows/${id}`)
      assert.include(await d.page.locator("[data-history]").textContent(), "FAILURE")
      assert.strictEqual(await text(d.page, `[data-field="status"]`), "PENDING")
    } finally {
      await d.close()
    }
  })

  it("a mutation from another site, or without the form token, is refused and changes nothing", async () => {
    const d = await start()
    try {
      const [id] = await d.run(failed(`dash-csrf-${randomUUID().slice(0, 8)}`, [1]))
      const body = new URLSearchParams({
        action: "requeue",
        ids: id!,
        operator: "mallory",
        reason: "x",
        confirm: "yes",
        limit: "10"
      })
      const forged = await fetch(`${d.url}/repairs/execute`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://evil.example" },
        body
      })
      assert.strictEqual(forged.status, 403)
      const tokenless = await fetch(`${d.url}/repairs/execute`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body
      })
      assert.strictEqual(tokenless.status, 403)
      // A page on another name resolving to loopback (DNS rebinding) is not served.
      const rebound = await new Promise<number | undefined>((resolve, reject) =>
        http
          .get(`${d.url}/`, { headers: { host: "attacker.example" } }, (res) => {
            res.resume()
            resolve(res.statusCode)
          })
          .on("error", reject)
      )
      assert.strictEqual(rebound, 421)
      assert.strictEqual(await d.run(statusOf(id!)), "FAILURE")
    } finally {
      await d.close()
    }
  })

  it("a dead letter is replayed from the page and leaves the depth (the replayed record shows as consumer lag); the other, found by its class, is discarded and the history lists both", async () => {
    const group = `dash-billing-${randomUUID().slice(0, 8)}`
    const d = await start({ groups: [group] })
    const topic = `dash-dlt-${randomUUID().slice(0, 8)}`
    const dlt = `${topic}.DLT`
    try {
      await d.run(
        BrokerAdmin.use((admin) =>
          Effect.andThen(admin.ensureTopic({ topic, partitions: 1 }), admin.ensureTopic({ topic: dlt, partitions: 1 }))
        )
      )
      await d.run(enqueue(topic, 1)) // the outbox knows the topic
      const ids = [0, 1].map(() => randomUUID())
      const letters = await d.run(
        poisonLetters(topic, dlt, ids, { attempts: 3, error: (i) => new TypeError(`poison ${i}`) })
      )
      await d.run(Publisher.use((p) => p.publish(letters)))

      await d.page.goto(`${d.url}/`)
      await eventually(async () => {
        await d.page.reload()
        assert.strictEqual(await text(d.page, `[data-dlt-pending="${dlt}"]`), "2")
      })
      await d.page.getByRole("link", { name: dlt }).first().click()
      assert.strictEqual(await d.page.locator("[data-dead-letters] tbody tr").count(), 2)
      assert.include(await d.page.locator("[data-dead-letters]").textContent(), "poison 0")
      assert.include(await text(d.page, "[data-error-class]"), "TypeError")

      await d.page.getByLabel(`select ${ids[0]}`).check()
      await d.page.getByRole("button", { name: "Replay selected…" }).click()
      assert.isNotNull(await d.page.locator("[data-dry-run]").textContent())
      await d.page.getByLabel("Operator").fill("bob")
      await d.page.getByLabel("Reason").fill("billing fixed")
      await d.page.getByRole("button", { name: /Confirm: replay 1 dead letter/ }).click()
      assert.include(await text(d.page, "[data-result]"), "replay by bob (billing fixed): 1 of 1")

      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-dlt-pending="${dlt}"]`), "1")
      assert.strictEqual(await text(d.page, `[data-metric="dead-letters"]`), "1")
      // The group never committed: the replayed record on the original topic is its lag.
      assert.strictEqual(await text(d.page, `[data-lag="${group}/${topic}/0"]`), "1")

      // The other one is discarded: handled without a replay, audited, and gone from the depth.
      await d.page.getByRole("link", { name: dlt }).first().click()
      await d.page.getByRole("link", { name: "TypeError" }).click()
      assert.include(await text(d.page, "[data-class-filter]"), "TypeError")
      await d.page.getByRole("link", { name: ids[1]! }).click()
      assert.include(await text(d.page, "[data-payload]"), `"broken": 1`)
      await d.page.getByRole("button", { name: "Discard…" }).click()
      assert.include(await text(d.page, "[data-dry-run]"), "Nothing was discarded")
      await d.page.getByLabel("Operator").fill("carol")
      await d.page.getByLabel("Reason").fill("order cancelled")
      await d.page.getByRole("button", { name: /Confirm: discard 1 dead letter/ }).click()
      assert.include(await text(d.page, "[data-result]"), "discard by carol (order cancelled): 1 of 1")
      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-dlt-pending="${dlt}"]`), "0")
      await d.page.goto(`${d.url}/dead-letters/history?topic=${dlt}`)
      assert.deepStrictEqual(await d.page.locator("[data-action]").allTextContents(), ["discard", "replay"])
    } finally {
      await d.close()
      await deleteTopics([topic, dlt, `${dlt}.audit`]).catch(() => undefined)
    }
  })

  it("the page works without the live stream: counts render and a release goes through", async () => {
    const d = await start()
    try {
      const topic = `dash-static-${randomUUID().slice(0, 8)}`
      const id = await d.run(enqueue(topic, 1, { prequeued: true }))
      await d.page.route("**/events", (route) => route.abort())
      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-count="PREQUEUED"]`), "1")
      assert.strictEqual(await text(d.page, "#live"), "static")
      await d.page.goto(`${d.url}/rows/${id}`)
      await d.page.getByRole("link", { name: "Release this row" }).click()
      await d.page.getByLabel("Operator").fill("carol")
      await d.page.getByLabel("Reason").fill("launch")
      await d.page.getByRole("button", { name: "Dry run" }).click()
      await d.page.getByRole("button", { name: /Confirm: release 1 row/ }).click()
      assert.include(await text(d.page, "[data-result]"), "1 of 1 selected row(s) changed")
      assert.strictEqual(await d.run(statusOf(id)), "PENDING")
      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-count="PENDING"]`), "1")
      assert.strictEqual(await text(d.page, `[data-count="PREQUEUED"]`), "0")
    } finally {
      await d.close()
    }
  })

  it("a blocked head is skipped and a stale lease recovered, each after its dry run", async () => {
    const d = await start()
    try {
      const topic = `dash-skip-${randomUUID().slice(0, 8)}`
      const [head] = await d.run(failed(topic, [1]))
      const waiting = await d.run(enqueue(topic, 2, { key: "k1" })) // behind the head on key k1
      await d.page.goto(`${d.url}/`)
      assert.strictEqual(await text(d.page, `[data-metric="blocked-keys"]`), "1")
      await d.page.getByRole("link", { name: "skip" }).first().click()
      await d.page.getByLabel("Operator").fill("dana")
      await d.page.getByLabel("Reason").fill("poison order, refunded by hand")
      await d.page.getByRole("button", { name: "Dry run" }).click()
      assert.strictEqual(await d.run(statusOf(head!)), "FAILURE")
      await d.page.getByRole("button", { name: /Confirm: skip 1 row/ }).click()
      assert.include(await text(d.page, "[data-result]"), "1 of 1 selected row(s) changed")
      assert.strictEqual(await d.run(statusOf(head!)), "SKIPPED")
      assert.strictEqual(await d.run(statusOf(waiting)), "PENDING")
      assert.isTrue(
        d.logs.some((l) => l.includes("AUDIT outbox skip by dana")),
        d.logs.join("\n")
      )

      // A claim whose lease already ran out; the broker never got it, so recovery requeues it.
      const stale = await d.run(enqueue(`${topic}-stale`, 3))
      await d.run(Transition.claim({ owner: "dead-relay", limit: 10, maxPerKey: 10, leaseMillis: 1 }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await d.page.goto(`${d.url}/repairs?action=recover-stale`)
      await d.page.getByLabel("Operator").fill("dana")
      await d.page.getByLabel("Reason").fill("relay crashed")
      await d.page.getByRole("button", { name: "Dry run" }).click()
      assert.strictEqual(await d.page.locator(`[data-selected] a[href$="/rows/${stale}"]`).count(), 1)
      assert.strictEqual(await d.run(statusOf(stale)), "DISPATCHING")
      await d.page.getByRole("button", { name: /Confirm: recover-stale/ }).click()
      assert.include(await text(d.page, "[data-result]"), "requeued")
      assert.strictEqual(await d.run(statusOf(stale)), "PENDING")
    } finally {
      await d.close()
    }
  })

  it("`effect-outbox dashboard` (the CLI binary) prints its address and serves the overview", async () => {
    const d = await start()
    const child = spawn(
      process.execPath,
      [
        new URL("../src/main.ts", import.meta.url).pathname,
        "--database-url",
        databaseUrl,
        "--schema",
        d.schema,
        "--brokers",
        brokers,
        "dashboard",
        "--port",
        "0"
      ],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    try {
      await d.run(failed(`dash-cli-${randomUUID().slice(0, 8)}`, [1, 2, 3]))
      const address = await new Promise<string>((resolve, reject) => {
        let out = ""
        const timer = setTimeout(() => reject(new Error(`no address printed: ${out}`)), 60_000)
        child.stdout.on("data", (chunk) => {
          out += String(chunk)
          const match = /effect-outbox dashboard: (http:\/\/127\.0\.0\.1:\d+)\//.exec(out)
          if (match !== null) {
            clearTimeout(timer)
            resolve(match[1]!)
          }
        })
        child.on("exit", (code) => reject(new Error(`exited ${code}: ${out}`)))
      })
      await d.page.goto(`${address}/`)
      assert.strictEqual(await text(d.page, `[data-count="FAILURE"]`), "3")
      assert.notInclude(await d.page.content(), databaseUrl, "the connection string is never rendered")
    } finally {
      child.kill("SIGTERM")
      await d.close()
    }
  })

  it("read-only mode offers no repair and refuses one; a token guards every page; mounted under a prefix", async () => {
    const token = "a-dashboard-token-for-tests"
    const d = await start({ readOnly: true, token, prefix: "/ops" })
    const ops = `${d.url}/ops`
    try {
      const [id] = await d.run(failed(`dash-ro-${randomUUID().slice(0, 8)}`, [1]))
      assert.strictEqual((await d.page.goto(`${ops}/`))?.status(), 401)
      await d.page.goto(`${ops}/rows/${id}?token=${token}`)
      assert.notInclude(d.page.url(), token, "the token leaves the address bar")
      assert.strictEqual(await text(d.page, `[data-field="status"]`), "FAILURE")
      assert.include(await text(d.page, ".banner"), "Read-only")
      assert.strictEqual(await d.page.getByRole("link", { name: "Requeue this row" }).count(), 0)
      const refused = await d.page.request.post(`${ops}/repairs/execute`, {
        form: { action: "requeue", ids: id!, operator: "x", reason: "y", confirm: "yes", csrf: "whatever" },
        headers: { origin: d.url }
      })
      assert.strictEqual(refused.status(), 403)
      assert.strictEqual(await d.run(statusOf(id!)), "FAILURE")
      assert.notInclude(await d.page.content(), token, "the token is never rendered")
      // The links stay under the prefix: the overview, from the row page's navigation.
      await d.page.getByRole("link", { name: "Overview" }).click()
      assert.strictEqual(await text(d.page, `[data-count="FAILURE"]`), "1")
      assert.strictEqual(await d.page.getByRole("link", { name: "requeue" }).count(), 0)
    } finally {
      await d.close()
    }
  })
})
