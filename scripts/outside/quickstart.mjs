// Runs the README's Quick start as a user would, in the outside project (scripts/outside-project),
// against the real services: a database of its own on DATABASE_URL's server, the broker at
// KAFKA_BROKERS. Passes when billing wrote an invoice for an event of this database's outbox.
//   node quickstart.mjs README.md APP_DIR REPORT.json
// What the block does not create itself (no CREATE TABLE in it; no topic creation in it) is
// created here first: the orders and invoices tables, its topic and dead-letter topic. A block
// that serves HTTP (a POST route) runs on a free port and gets one order POSTed; a block that
// launches nothing itself gets the README's next step appended: placeOrder(...) inside the running
// OutboxLive.
import { spawn } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { createServer } from "node:net"
import { join } from "node:path"

const [readmePath, app, reportPath] = process.argv.slice(2)
const require = createRequire(join(app, "package.json"))
const pg = require("pg")
const { Kafka, logLevel } = require("kafkajs")
const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")
const deadline = Date.now() + Number(process.env.QUICKSTART_TIMEOUT_MS ?? 90_000)
const say = (line) => console.error(`[quickstart] ${line}`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const readme = readFileSync(readmePath, "utf8")
const block = /## Quick start[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1]
const checks = []
const result = (name, ok, detail) => {
  checks.push({ title: name, status: ok ? "passed" : "failed" })
  say(`${ok ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`)
}

const run = async () => {
  if (!block) return result("README.md has a ```ts block under ## Quick start", false)
  const launches = /runMain|runFork|runPromise|Layer\.launch|ManagedRuntime/.test(block)
  const orderId = `o-${Date.now()}`
  // Its own topic and consumer group (a suffix on the names the block chose, nothing else changed):
  // on a shared broker another process's "billing" member would take the partition, and the
  // invoice would land in that process's database.
  const suffix = `_outside_${process.pid}`
  // A block that serves HTTP gets a free port instead of its fixed one, and its order is POSTed.
  const route = /HttpRouter\.add\(\s*"POST",\s*"([^"]+)"/.exec(block)?.[1]
  const port = route ? await freePort() : undefined
  const named = block
    .replace(/(Topic\.make\(\{\s*name:\s*")([^"]+)"/g, `$1$2${suffix}"`)
    .replace(/(groupId:\s*")([^"]+)"/g, `$1$2${suffix}"`)
    .replace(/\bport:\s*\d+/g, `port: ${port}`)
  const source = launches
    ? named
    : `${named}
// Appended by scripts/outside/quickstart.mjs: the README's next step, inside the running runtime
// (runMain: SIGTERM interrupts it and the runtime shuts down, leaving its consumer group).
import { NodeRuntime } from "@effect/platform-node"
NodeRuntime.runMain(Effect.gen(function*() {
  yield* placeOrder({ orderId: ${JSON.stringify(orderId)}, amountCents: 1200 })
  return yield* Effect.never
}).pipe(Effect.provide(OutboxLive)))
`
  mkdirSync(join(app, "quickstart"), { recursive: true })
  const main = join(app, "quickstart", "main.ts")
  writeFileSync(main, source)

  // A database of its own: nothing of an earlier run or of a parallel one is counted.
  const database = `outside_quickstart_${process.pid}_${Date.now() % 1_000_000}`
  const admin = new pg.Client({ connectionString: databaseUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${database}`)
  const url = new URL(databaseUrl)
  url.pathname = `/${database}`
  const db = new pg.Client({ connectionString: url.toString() })
  await db.connect()
  const kafka = new Kafka({ clientId: "outside-quickstart", brokers, logLevel: logLevel.NOTHING })
  const topic = /Topic\.make\(\{\s*name:\s*"([^"]+)"/.exec(named)?.[1] ?? "orders"
  let child
  try {
    if (!/CREATE TABLE/i.test(block)) {
      await db.query("CREATE TABLE orders (id text PRIMARY KEY, amount_cents integer NOT NULL)")
      await db.query("CREATE TABLE invoices (order_id text NOT NULL, event_id text NOT NULL)")
      say("created tables orders, invoices")
    }
    if (!/ensureTopic|createTopics|topics ensure|autoCreateTopics/.test(block)) {
      const kafkaAdmin = kafka.admin()
      await kafkaAdmin.connect()
      const existing = new Set(await kafkaAdmin.listTopics())
      const wanted = [topic, `${topic}.DLT`].filter((name) => !existing.has(name))
      if (wanted.length > 0) await kafkaAdmin.createTopics({ topics: wanted.map((name) => ({ topic: name })) })
      await kafkaAdmin.disconnect()
      say(`created topics ${topic}, ${topic}.DLT`)
    }
    const log = []
    const started = Date.now()
    child = spawn(process.execPath, [main], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: url.toString(), KAFKA_BROKERS: brokers.join(",") },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout.on("data", (chunk) => log.push(chunk.toString()))
    child.stderr.on("data", (chunk) => log.push(chunk.toString()))
    let exited
    child.on("exit", (code, signal) => {
      exited = { code, signal, at: Date.now() }
    })
    let invoice
    let posted = route === undefined
    while (!invoice && !exited && Date.now() < deadline) {
      await sleep(250)
      if (!posted) {
        // The server is up once it answers; the order is placed by the block's own handler.
        const response = await fetch(`http://127.0.0.1:${port}${route}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ orderId, amountCents: 1200 })
        }).catch(() => undefined)
        if (response !== undefined) {
          posted = true
          say(`POST ${route} -> ${response.status}`)
          if (response.status >= 300) break
        }
        continue
      }
      // The outbox's message table, wherever the configuration put it (migrated at start-up).
      const table = await db
        .query(
          "SELECT format('%I.%I', table_schema, table_name) AS name FROM information_schema.tables WHERE table_name LIKE '%message' AND table_schema NOT IN ('public', 'pg_catalog', 'information_schema') LIMIT 1"
        )
        .then((r) => r.rows[0]?.name)
      if (!table) continue
      invoice = await db
        .query(`SELECT i.order_id, i.event_id FROM invoices i JOIN ${table} m ON m.id::text = i.event_id LIMIT 1`)
        .then((r) => r.rows[0])
        .catch(() => undefined) // invoices not created yet (a block that creates its own tables)
    }
    const took = Date.now() - started
    result(
      "the README's Quick start runs and billing writes an invoice for its order",
      invoice !== undefined,
      invoice
        ? `order ${invoice.order_id}, event ${invoice.event_id}, ${took} ms after start`
        : exited
          ? `the program exited (code ${exited.code}, signal ${exited.signal}) with no invoice:\n${log.join("").slice(-3000)}`
          : `no invoice within ${took} ms:\n${log.join("").slice(-3000)}`
    )
    if (!exited) {
      const stopAt = Date.now()
      child.kill("SIGTERM")
      while (!exited && Date.now() - stopAt < 20_000) await sleep(100)
      say(exited ? `exited ${exited.at - stopAt} ms after SIGTERM` : "still running 20 s after SIGTERM: killed")
    }
  } finally {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    // This run's topics go with it (each run has its own names).
    const kafkaAdmin = kafka.admin()
    await kafkaAdmin
      .connect()
      .then(() => kafkaAdmin.deleteTopics({ topics: [topic, `${topic}.DLT`] }))
      .catch(() => {})
    await kafkaAdmin.disconnect().catch(() => {})
    await db.end().catch(() => {})
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {})
    await admin.end().catch(() => {})
  }
}

await run().catch((error) => result("the README's Quick start runs", false, String(error?.stack ?? error)))
const failed = checks.filter((c) => c.status === "failed").length
writeFileSync(
  reportPath,
  JSON.stringify({
    numPassedTests: checks.length - failed,
    numFailedTests: failed,
    testResults: [
      { name: "outside-project: quick start", status: failed ? "failed" : "passed", assertionResults: checks }
    ]
  })
)
process.exitCode = failed ? 1 : 0
