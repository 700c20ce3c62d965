// The dead-letter pages through real HTTP on a dashboard mounted with a token, against real
// PostgreSQL and Kafka: a page of letters grouped by error class and filtered by one, one
// letter's headers and payload (cut at the limit, with a note), the audited discard (refused
// without the token or the form token; done, it leaves the depth like a replay), and the history
// of replays and discards read back from the audit topic. A fresh schema and topics per test.

import { randomUUID } from "node:crypto"
import * as http from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { HttpRouter } from "effect/http"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { assert, describe, it } from "vitest"
import * as Dashboard from "../src/Dashboard.ts"
import * as Operations from "../src/Operations.ts"
import { brokers, deleteTopics } from "./support/kafka.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const token = "a-dead-letter-dashboard-token"
const bearer = { authorization: `Bearer ${token}` }

/** The routes under `/outbox` with a token, in a server on 127.0.0.1, over real PostgreSQL and Kafka. */
const start = async () => {
  const schema = `dashd_${randomUUID().replaceAll("-", "").slice(0, 20)}`
  const services = Outbox.layerWith({}).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema, wakeUp: { listen: false } })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 })),
    Layer.provideMerge(KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "dashboard-dlt-test" }))
  )
  const server = HttpRouter.serve(Dashboard.routes({ prefix: "/outbox", refresh: "1 second", token }), {
    disableListenLog: true,
    disableLogger: true
  }).pipe(Layer.provideMerge(NodeHttpServer.layer(http.createServer, { port: 0, host: "127.0.0.1" })))
  const scope = Scope.makeUnsafe()
  const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Logger.CurrentLoggers, new Set<Logger.Logger<unknown, unknown>>()))
  const context = await Effect.runPromise(quiet(Layer.buildWithScope(server.pipe(Layer.provideMerge(services)), scope)))
  type Services = typeof context extends Context.Context<infer R> ? R : never
  const run = <A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> =>
    Effect.runPromise(quiet(Effect.provideContext(effect, context)))
  const port = Number(new URL(await run(Dashboard.url())).port)
  const get = (path: string, headers: Record<string, string> = bearer) =>
    request("127.0.0.1", port, `/outbox${path}`, { headers })
  const post = (
    path: string,
    form: Record<string, string | ReadonlyArray<string>>,
    headers: Record<string, string> = bearer
  ) => request("127.0.0.1", port, `/outbox${path}`, { method: "POST", headers, form })
  const close = async () => {
    await run(
      Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  return { run, get, post, close }
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
  options: {
    method?: string
    headers?: Record<string, string>
    form?: Record<string, string | ReadonlyArray<string>>
  } = {}
) =>
  new Promise<Reply>((resolve, reject) => {
    const body = options.form === undefined ? undefined : formBody(options.form)
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

const formBody = (form: Record<string, string | ReadonlyArray<string>>) => {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(form)) {
    for (const v of typeof value === "string" ? [value] : value) params.append(name, v)
  }
  return params.toString()
}

const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1]

/** A topic's `retention.ms`, as the broker reports it. */
const retentionOf = async (topic: string) => {
  const { default: Kafkajs } = await import("kafkajs")
  const admin = new Kafkajs.Kafka({ brokers: brokers.split(","), logLevel: Kafkajs.logLevel.NOTHING }).admin()
  await admin.connect()
  try {
    const described = await admin.describeConfigs({
      resources: [{ type: Kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["retention.ms"] }],
      includeSynonyms: false
    })
    return described.resources[0]?.configEntries.find((e) => e.configName === "retention.ms")?.configValue
  } finally {
    await admin.disconnect()
  }
}

const bigPayload = new TextEncoder().encode("x".repeat(70_000))

/** Dead-letters four records of `topic` onto `dlt` (partition 0, offsets 0..3): two TypeErrors, a RangeError, a SyntaxError. */
const seed = (topic: string, dlt: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* BrokerAdmin.use((admin) =>
      Effect.andThen(admin.ensureTopic({ topic, partitions: 1 }), admin.ensureTopic({ topic: dlt, partitions: 1 }))
    )
    yield* Outbox.enqueueAutocommit({ topic, key: "k", payload: jsonPayload({ known: true }) })
    const errors = [
      new TypeError("poison 0"),
      new RangeError("too big"),
      new TypeError("poison 2"),
      new SyntaxError("bad")
    ]
    const letters = yield* Effect.forEach(ids, (id, i) =>
      DeadLetter.toPublishRequest(
        {
          topic,
          partition: 0,
          offset: String(10 + i),
          key: `k${i}`,
          headers: { "event-id": id, "tenant-id": `tenant-${i}` },
          value: i === 1 ? bigPayload : jsonPayload({ order: i, lines: [1, 2] }),
          timestamp: Date.now()
        },
        dlt,
        { error: errors[i], attempts: 3, classification: "permanent", consumerGroup: "billing" }
      )
    )
    // One at a time: the letters land at offsets 0..3 in this order.
    for (const letter of letters) yield* Publisher.use((p) => p.publish([letter]))
  })

const pendingOf = (topic: string) => Effect.map(Operations.deadLetterDepth([topic]), (depths) => depths[0]?.pending)

describe("the dashboard's dead letters", () => {
  it("a page groups its letters by error class and filters by one; a letter shows every header and its payload, cut at the limit", async () => {
    const d = await start()
    const topic = `dashd-${randomUUID().slice(0, 8)}`
    const dlt = `${topic}.DLT`
    const ids = [0, 1, 2, 3].map(() => randomUUID())
    try {
      await d.run(seed(topic, dlt, ids))
      const page = await d.get(`/dead-letters?topic=${dlt}`)
      assert.strictEqual(page.status, 200, page.body)
      assert.include(page.body, `data-class-count="TypeError">2<`)
      assert.include(page.body, `data-class-count="RangeError">1<`)
      assert.include(page.body, `data-class-count="SyntaxError">1<`)
      assert.strictEqual(page.body.match(/data-error-class>/g)?.length, 4)

      const only = await d.get(`/dead-letters?topic=${dlt}&class=TypeError`)
      assert.include(only.body, "data-class-filter")
      assert.strictEqual(only.body.match(/data-error-class>TypeError/g)?.length, 2)
      assert.notInclude(only.body, "data-error-class>RangeError")
      assert.include(only.body, ids[0]!)
      assert.include(only.body, ids[2]!)
      assert.notInclude(only.body, ids[1]!)

      const first = await d.get(`/dead-letters/letter?topic=${dlt}&letter=0/0`)
      assert.strictEqual(first.status, 200, first.body)
      for (const header of ["event-id", "tenant-id", "dlt-error-class", "dlt-original-offset", "dlt-attempts"]) {
        assert.include(first.body, `<td>${header}</td>`)
      }
      assert.include(first.body, "tenant-0")
      assert.include(first.body, `data-payload-kind="json"`)
      assert.include(first.body, "&quot;order&quot;: 0") // pretty-printed
      assert.notInclude(first.body, "data-payload-truncated")

      const big = await d.get(`/dead-letters/letter?topic=${dlt}&letter=0/1`)
      assert.include(big.body, "showing the first 65536 of 70000 bytes")
      assert.isBelow(big.body.length, 70_000, "the page holds the first 64 KiB only")

      const missing = await d.get(`/dead-letters/letter?topic=${dlt}&letter=0/99`)
      assert.strictEqual(missing.status, 400)
      assert.include(missing.body, "no dead letter at 0/99")
      const garbage = await d.get(`/dead-letters/letter?topic=${dlt}&letter=zero`)
      assert.strictEqual(garbage.status, 400)
      assert.include(garbage.body, "partition/offset")
    } finally {
      await d.close()
      await deleteTopics([topic, dlt]).catch(() => undefined)
    }
  })

  it("a discard needs the token and the form token, is audited, counts as handled in the depth, and shows in the history with the replays", async () => {
    const d = await start()
    const topic = `dashd-${randomUUID().slice(0, 8)}`
    const dlt = `${topic}.DLT`
    const ids = [0, 1, 2, 3].map(() => randomUUID())
    try {
      await d.run(seed(topic, dlt, ids))
      assert.strictEqual(await d.run(pendingOf(topic)), 4)

      const preview = await d.get(`/dead-letters/discard?topic=${dlt}&letter=0/0`)
      assert.strictEqual(preview.status, 200, preview.body)
      assert.include(preview.body, "Nothing was discarded")
      assert.include(preview.body, ids[0]!)
      const csrf = csrfOf(preview.body)
      assert.isDefined(csrf)
      const nowhere = await d.get(`/dead-letters/discard?topic=${dlt}&letter=0/77`)
      assert.include(nowhere.body, "0/77: no dead letter there")
      assert.isUndefined(csrfOf(nowhere.body), "nothing to confirm")
      const form = { topic: dlt, letter: "0/0", operator: "alice", reason: "customer deleted", confirm: "yes" }

      const noToken = await d.post("/dead-letters/discard", { ...form, csrf: csrf! }, {})
      assert.strictEqual(noToken.status, 401)
      const noFormToken = await d.post("/dead-letters/discard", { ...form, csrf: "forged" })
      assert.strictEqual(noFormToken.status, 403)
      const noReason = await d.post("/dead-letters/discard", { ...form, reason: "", csrf: csrf! })
      assert.strictEqual(noReason.status, 400)
      assert.strictEqual(await d.run(pendingOf(topic)), 4, "nothing discarded by refused requests")
      assert.include((await d.get(`/dead-letters/history?topic=${dlt}`)).body, "none")

      const done = await d.post("/dead-letters/discard", { ...form, csrf: csrf! })
      assert.strictEqual(done.status, 200, done.body)
      assert.include(done.body, "discard by alice (customer deleted): 1 of 1 dead letter(s)")
      assert.strictEqual(await retentionOf(`${dlt}.audit`), "-1", "the audit topic does not expire")
      assert.strictEqual(await d.run(pendingOf(topic)), 3, "the discarded oldest letter is handled")

      // A later letter discarded first is remembered: once the one before it is replayed, both count as handled.
      const later = await d.post("/dead-letters/discard", { ...form, letter: "0/2", reason: "duplicate", csrf: csrf! })
      assert.strictEqual(later.status, 200, later.body)
      assert.strictEqual(await d.run(pendingOf(topic)), 3)
      const replayed = await d.post("/dead-letters/replay", {
        topic: dlt,
        eventId: ids[1]!,
        operator: "bob",
        reason: "limit raised",
        confirm: "yes",
        csrf: csrf!
      })
      assert.strictEqual(replayed.status, 200, replayed.body)
      assert.include(replayed.body, "replay by bob (limit raised): 1 of 1")
      assert.strictEqual(await d.run(pendingOf(topic)), 1, "only the SyntaxError letter waits")

      const history = await d.get(`/dead-letters/history?topic=${dlt}`)
      assert.strictEqual(history.status, 200)
      const actions = [...history.body.matchAll(/<span data-action>(\w+)<\/span>/g)].map((m) => m[1])
      assert.deepStrictEqual(actions, ["replay", "discard", "discard"], "newest first")
      assert.include(history.body, "bob")
      assert.include(history.body, "limit raised")
      assert.include(history.body, "customer deleted")
      assert.include(history.body, ids[2]!)

      const letter = await d.get(`/dead-letters/letter?topic=${dlt}&letter=0/0`)
      assert.include(letter.body, "<span data-action>discard</span>")
      assert.include(letter.body, "alice")
      // The letters stay on the topic (append-only): the page still lists all four, each with what was done.
      const page = await d.get(`/dead-letters?topic=${dlt}`)
      assert.strictEqual(page.body.match(/data-error-class>/g)?.length, 4)
      const marks = [...page.body.matchAll(/data-handled="(\w+)">([^<]*)</g)].map((m) => [m[1], m[2]!.split(",")[0]])
      assert.deepStrictEqual(marks, [
        ["discard", "discarded by alice"],
        ["replay", "replayed by bob"],
        ["discard", "discarded by alice"]
      ])
    } finally {
      await d.close()
      await deleteTopics([topic, dlt, `${dlt}.audit`]).catch(() => undefined)
    }
  })
})
