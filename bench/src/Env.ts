/**
 * Where the services are and the shared plumbing every scenario uses: a kafkajs client, topics
 * with 3 partitions, 1 KB payloads, unique names, and a PostgreSQL client layer.
 */

import { randomBytes, randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import type * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import Kafkajs from "kafkajs"

export const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",").map((b) => b.trim())
export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

export const PARTITIONS = 3
export const PAYLOAD_BYTES = 1024
/** Keys spread over many aggregates, so per-key ordering rarely limits a batch. */
export const KEYS = 1000

export const runId = `${Date.now().toString(36)}${randomBytes(2).toString("hex")}`
export const uniqueName = (prefix: string): string => `${prefix}_${runId}_${randomBytes(3).toString("hex")}`

/** A 1 KB payload: JSON with a filler, so it decodes like a real event. */
export const payload = (i: number): Uint8Array => {
  const head = `{"i":${i},"pad":"`
  const tail = `"}`
  return new TextEncoder().encode(head + "x".repeat(PAYLOAD_BYTES - head.length - tail.length) + tail)
}
export const payloadBuffer = (i: number): Buffer => Buffer.from(payload(i))
export const keyOf = (i: number): string => `user-${i % KEYS}`

export const kafka = (clientId = "effect-outbox-bench"): Kafkajs.Kafka =>
  new Kafkajs.Kafka({ clientId, brokers, logLevel: Kafkajs.logLevel.NOTHING })

export const createTopic = async (
  admin: Kafkajs.Admin,
  topic: string,
  configEntries: Array<{ name: string; value: string }> = []
): Promise<void> => {
  try {
    await admin.createTopics({
      topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1, configEntries }],
      waitForLeaders: true
    })
  } catch (error) {
    // On a loaded machine the broker may answer metadata for a topic the controller just created
    // with UNKNOWN_TOPIC_OR_PARTITION, which kafkajs's wait for leaders does not retry: the topic
    // exists, so wait for its leaders here.
    if ((error as { readonly type?: unknown }).type !== "UNKNOWN_TOPIC_OR_PARTITION") throw error
    await leadersOf(admin, topic)
  }
}

/** Waits (up to 30 s) until every partition of `topic` has a leader. */
const leadersOf = async (admin: Kafkajs.Admin, topic: string): Promise<void> => {
  const deadline = Date.now() + 30_000
  for (;;) {
    const ready = await admin
      .fetchTopicMetadata({ topics: [topic] })
      .then(
        ({ topics }) => topics[0]?.partitions.length === PARTITIONS && topics[0].partitions.every((p) => p.leader >= 0)
      )
      .catch(() => false)
    if (ready) return
    if (Date.now() > deadline) throw new Error(`topic ${topic}: no leader for every partition within 30 s`)
    await sleep(200)
  }
}

export const deleteTopics = async (admin: Kafkajs.Admin, topics: ReadonlyArray<string>): Promise<void> => {
  if (topics.length > 0) await admin.deleteTopics({ topics: [...topics], timeout: 30_000 }).catch(() => undefined)
}

/** Sum of the high watermarks: records on the topic (fresh topics start at offset 0). */
export const topicRecords = async (admin: Kafkajs.Admin, topic: string): Promise<number> => {
  const offsets = await admin.fetchTopicOffsets(topic)
  return offsets.reduce((sum, o) => sum + Number(o.high), 0)
}

/** The idempotent producer both sides use: acks=-1 is passed per send. */
export const rawProducer = (k: Kafkajs.Kafka): Kafkajs.Producer =>
  k.producer({ idempotent: true, maxInFlightRequests: 5, allowAutoTopicCreation: false })

/**
 * `BENCH_SYNCHRONOUS_COMMIT=off` runs every bench session with `synchronous_commit = off`: COMMIT
 * no longer waits for the WAL flush, which on a machine whose disk other work keeps busy is most
 * of a transaction's time and hides what the client does (the round trips and their CPU). A
 * diagnostic setting, said next to any figure measured with it.
 */
const sessionDefaults: Record<string, string> =
  process.env.BENCH_SYNCHRONOUS_COMMIT === undefined ? {} : { synchronous_commit: process.env.BENCH_SYNCHRONOUS_COMMIT }

export const pgLayer = (
  maxConnections = 10,
  startupParameters: Record<string, string> = sessionDefaults
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  PgClient.layer({
    url: Redacted.make(databaseUrl),
    maxConnections,
    applicationName: "effect-outbox-bench",
    startupParameters
  })

export const newEventId = (): string => randomUUID()

/**
 * A time-ordered UUIDv7, as the library gives its events (and as a hand-written outbox would use
 * for its key): the hand-written baseline of scenario 3 must not pay random-UUID index inserts the
 * library does not.
 */
export const newEventIdV7 = (): string => {
  const bytes = randomBytes(16)
  let ts = Date.now()
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ts % 256
    ts = Math.floor(ts / 256)
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const hex = bytes.toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/** A well-formed W3C `traceparent` value derived from an event id (the length `Outbox.enqueue` writes). */
export const traceparentOf = (id: string): string => {
  const hex = id.replaceAll("-", "")
  return `00-${hex}-${hex.slice(0, 16)}-01`
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** What one commit of the latency load returns: its event ids and when the commit returned. */
export interface Committed {
  readonly ids: ReadonlyArray<string>
  readonly committedAt: number
}

/**
 * The latency scenarios' load: every 10 ms, the events that "arrived" since (at `rate`/s for
 * `seconds`) are committed in one `commit(from, n)` call. Returns each event's commit time by id;
 * `onCommitted` sees each commit as it returns.
 */
export const commitAtRate = async (
  rate: number,
  seconds: number,
  commit: (from: number, n: number) => Promise<Committed>,
  onCommitted: (committed: Committed) => void = () => undefined
): Promise<Map<string, number>> => {
  const committed = new Map<string, number>()
  const started = Date.now()
  const total = Math.round(rate * seconds)
  let produced = 0
  while (produced < total) {
    const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * rate))
    if (due > produced) {
      const result = await commit(produced, due - produced)
      for (const id of result.ids) committed.set(id, result.committedAt)
      onCommitted(result)
      produced = due
    }
    await sleep(10)
  }
  return committed
}
