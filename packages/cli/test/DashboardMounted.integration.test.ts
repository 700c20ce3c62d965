// The dashboard mounted in a service's own server on every interface, as the docs show, reached
// with real HTTP requests over the machine's non-loopback address: without a token nothing but
// this machine gets in, whatever `Host` says; with a token, reads and mutations need it (and a
// mutation the form token too). The dead-letter page reads one page of a topic, however large.
// Real PostgreSQL and Kafka, a fresh schema per test.

import { randomUUID } from "node:crypto"
import * as http from "node:http"
import { networkInterfaces } from "node:os"
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Outbox from "@effect-outbox/core/Outbox"
import { type EventId, jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { HttpRouter } from "effect/http"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import { assert, describe, it } from "vitest"
import * as Dashboard from "../src/Dashboard.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092"

/** This machine's first non-loopback IPv4 address: requests to it arrive from it, not from loopback. */
const outsideAddress = (() => {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address
  }
  throw new Error("this test needs a non-loopback IPv4 interface")
})()

const bigTopic = "orders.DLT"
const bigTopicSize = 100_000

/** A dead-letter topic of 100,000 records, made as they are read; `pulled` counts what was read. */
const largeTopicReader = (pulled: { n: number }) =>
  Layer.succeed(TopicReader, {
    read: (topic: string) =>
      Stream.unfold(0, (n) =>
        Effect.sync(() => {
          if (n >= bigTopicSize) return undefined
          pulled.n++
          const record: ConsumerRecord = {
            topic,
            partition: 0,
            offset: String(n),
            key: `k${n}`,
            headers: {
              [DeadLetter.headers.originalTopic]: "orders",
              [DeadLetter.headers.originalPartition]: "0",
              [DeadLetter.headers.originalOffset]: String(n),
              [DeadLetter.headers.errorClass]: "Refused",
              [DeadLetter.headers.consumerGroup]: "billing"
            },
            value: new TextEncoder().encode(`{"n":${n}}`),
            timestamp: 0
          }
          return [record, n + 1] as const
        })
      )
  })

/** The routes mounted under `/outbox` in a server listening on 0.0.0.0, as a service would. */
const start = async (options: Dashboard.Options = {}) => {
  const schema = `dashm_${randomUUID().replaceAll("-", "").slice(0, 20)}`
  const pulled = { n: 0 }
  const services = Outbox.layerWith({}).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema, wakeUp: { listen: false } })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 })),
    Layer.provideMerge(
      Layer.merge(
        KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "dashboard-mounted-test" }),
        largeTopicReader(pulled)
      )
    )
  )
  const server = HttpRouter.serve(Dashboard.routes({ prefix: "/outbox", refresh: "1 second", ...options }), {
    disableListenLog: true,
    disableLogger: true
  }).pipe(Layer.provideMerge(NodeHttpServer.layer(http.createServer, { port: 0, host: "0.0.0.0" })))
  const scope = Scope.makeUnsafe()
  const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Logger.CurrentLoggers, new Set<Logger.Logger<unknown, unknown>>()))
  const context = await Effect.runPromise(quiet(Layer.buildWithScope(server.pipe(Layer.provideMerge(services)), scope)))
  type Services = typeof context extends Context.Context<infer R> ? R : never
  const run = <A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> =>
    Effect.runPromise(quiet(Effect.provideContext(effect, context)))
  const port = Number(new URL(await run(Dashboard.url())).port)
  const close = async () => {
    await run(
      Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  return { port, run, pulled, close }
}

interface Reply {
  readonly status: number
  readonly body: string
}

/** A real HTTP request to `address:port` with the given headers (`Host` included: it is the client's to choose). */
const request = (
  address: string,
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string>; form?: Record<string, string> } = {}
) =>
  new Promise<Reply>((resolve, reject) => {
    const body = options.form === undefined ? undefined : new URLSearchParams(options.form).toString()
    const req = http.request(
      {
        host: address,
        port,
        path,
        method: options.method ?? "GET",
        headers: {
          ...(body === undefined
            ? {}
            : {
                "content-type": "application/x-www-form-urlencoded",
                "content-length": String(Buffer.byteLength(body))
              }),
          ...options.headers
        }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
      }
    )
    req.on("error", reject)
    req.end(body)
  })

const prequeued = (topic: string) =>
  Outbox.enqueueAutocommit({ topic, key: "k1", payload: jsonPayload({ n: 1 }), prequeued: true })

const statusOf = (id: EventId) =>
  OutboxStore.use((store) => store.get(id)).pipe(Effect.map((row) => Option.getOrThrow(row).status))

const releaseForm = (id: string, csrf: string) => ({
  action: "release",
  ids: id,
  operator: "x",
  reason: "y",
  confirm: "yes",
  csrf
})

const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1]

describe("the dashboard mounted in a service's server on 0.0.0.0", () => {
  it("without a token: a non-loopback connection is refused whatever its Host, reads and mutations alike; loopback is served", async () => {
    const d = await start()
    try {
      const id = await d.run(prequeued(`dashm-${randomUUID().slice(0, 8)}`))
      for (const host of [undefined, "localhost", "127.0.0.1", `localhost:${d.port}`]) {
        const headers = host === undefined ? {} : { host }
        const overview = await request(outsideAddress, d.port, "/outbox/", { headers })
        assert.strictEqual(overview.status, 403, `Host ${host}: ${overview.body}`)
        assert.include(overview.body, "no token")
        assert.notInclude(overview.body, "PREQUEUED")
        const row = await request(outsideAddress, d.port, `/outbox/rows/${id}`, { headers })
        assert.strictEqual(row.status, 403)
        const preview = await request(
          outsideAddress,
          d.port,
          `/outbox/repairs/preview?action=release&ids=${id}&operator=x&reason=y`,
          { headers }
        )
        assert.strictEqual(preview.status, 403)
        assert.isUndefined(csrfOf(preview.body), "no form token leaks")
      }
      // The form token read over loopback does not open the door from outside either.
      const local = await request(
        "127.0.0.1",
        d.port,
        `/outbox/repairs/preview?action=release&ids=${id}&operator=x&reason=y`
      )
      assert.strictEqual(local.status, 200)
      const csrf = csrfOf(local.body)
      assert.isDefined(csrf)
      const forged = await request(outsideAddress, d.port, "/outbox/repairs/execute", {
        method: "POST",
        headers: { host: "localhost" },
        form: releaseForm(id, csrf!)
      })
      assert.strictEqual(forged.status, 403)
      assert.strictEqual(await d.run(statusOf(id)), "PREQUEUED")
      // A request a local proxy relayed arrives from loopback, but says so: refused too.
      const relayed = await request("127.0.0.1", d.port, "/outbox/", { headers: { "x-forwarded-for": "203.0.113.9" } })
      assert.strictEqual(relayed.status, 403)
      // This machine itself is served, and may repair with the form token.
      assert.strictEqual((await request("127.0.0.1", d.port, "/outbox/")).status, 200)
      const released = await request("127.0.0.1", d.port, "/outbox/repairs/execute", {
        method: "POST",
        form: releaseForm(id, csrf!)
      })
      assert.strictEqual(released.status, 200, released.body)
      assert.strictEqual(await d.run(statusOf(id)), "PENDING")
    } finally {
      await d.close()
    }
  })

  it("with a token: from outside, every page needs it (Host changes nothing), and a mutation needs it and the form token", async () => {
    const token = "a-mounted-dashboard-token"
    const d = await start({ token })
    try {
      const id = await d.run(prequeued(`dashm-${randomUUID().slice(0, 8)}`))
      const bearer = { authorization: `Bearer ${token}` }
      for (const host of [undefined, "localhost"]) {
        const headers = host === undefined ? {} : { host }
        assert.strictEqual((await request(outsideAddress, d.port, "/outbox/", { headers })).status, 401)
      }
      assert.strictEqual(
        (
          await request(outsideAddress, d.port, "/outbox/", {
            headers: { authorization: "Bearer a-mounted-dashboard-tokeX" }
          })
        ).status,
        401
      )
      // Any name the service is reached by works with the token.
      const ok = await request(outsideAddress, d.port, "/outbox/", { headers: { ...bearer, host: "orders.internal" } })
      assert.strictEqual(ok.status, 200)
      const preview = await request(
        outsideAddress,
        d.port,
        `/outbox/repairs/preview?action=release&ids=${id}&operator=x&reason=y`,
        { headers: bearer }
      )
      const csrf = csrfOf(preview.body)
      assert.isDefined(csrf)
      const withoutToken = await request(outsideAddress, d.port, "/outbox/repairs/execute", {
        method: "POST",
        headers: { host: "localhost" },
        form: releaseForm(id, csrf!)
      })
      assert.strictEqual(withoutToken.status, 401)
      const withoutForm = await request(outsideAddress, d.port, "/outbox/repairs/execute", {
        method: "POST",
        headers: bearer,
        form: releaseForm(id, "not-the-form-token")
      })
      assert.strictEqual(withoutForm.status, 403)
      assert.strictEqual(await d.run(statusOf(id)), "PREQUEUED")
      const released = await request(outsideAddress, d.port, "/outbox/repairs/execute", {
        method: "POST",
        headers: bearer,
        form: releaseForm(id, csrf!)
      })
      assert.strictEqual(released.status, 200, released.body)
      assert.strictEqual(await d.run(statusOf(id)), "PENDING")
    } finally {
      await d.close()
    }
  })

  it("the dead-letter page of a 100,000-record topic reads one page of it, and pages on; a letter's page reads up to it", async () => {
    const d = await start()
    try {
      const first = await request("127.0.0.1", d.port, `/outbox/dead-letters?topic=${bigTopic}`)
      assert.strictEqual(first.status, 200, first.body)
      assert.include(first.body, "letters 1–100 (more follow)")
      assert.strictEqual(first.body.match(/data-error-class/g)?.length, 100)
      assert.isAtMost(d.pulled.n, 101, "the read stopped after one page (and one letter to know more follow)")
      d.pulled.n = 0
      const third = await request("127.0.0.1", d.port, `/outbox/dead-letters?topic=${bigTopic}&skip=200`)
      assert.include(third.body, "letters 201–300 (more follow)")
      assert.include(third.body, "orders[0]@200")
      assert.notInclude(third.body, "orders[0]@300<")
      assert.isAtMost(d.pulled.n, 301)
      // One letter's page reads up to that letter, no further.
      d.pulled.n = 0
      const one = await request("127.0.0.1", d.port, `/outbox/dead-letters/letter?topic=${bigTopic}&letter=0/150`)
      assert.strictEqual(one.status, 200, one.body)
      assert.include(one.body, "orders[0]@150")
      assert.include(one.body, "&quot;n&quot;: 150")
      assert.isAtMost(d.pulled.n, 152, "up to the letter, and the one after it that ends the read")
    } finally {
      await d.close()
    }
  })
})
