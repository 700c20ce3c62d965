/**
 * `log inspect <event-id>`: where one event of the log engine stands — committed (a row of the
 * event table), published (the broker holds it, or the quarantine says), quarantined.
 *
 * @since 0.1.0
 */
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Console from "effect/Console"
import { Argument, Command, type Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as Operations from "../Operations.ts"
import { database, type RootConfig, reachableBroker, root, userError } from "./Root.ts"

/**
 * What `log inspect` found.
 *
 * @since 0.1.0
 * @category models
 */
export interface EventReport {
  readonly eventId: string
  readonly committed: boolean
  readonly event: {
    readonly topic: string
    readonly key: string | null
    readonly partition: number | null
    readonly headers: Readonly<Record<string, string>>
    readonly payloadBytes: number
    readonly payloadPreview: string
    readonly createdAt: string
    readonly invalid: string | null
  } | null
  /**
   * `published` / `not published` rest on the quarantine row or on the broker (a record with this
   * `event-id` header on the event's topic); without a broker the answer is `unknown`.
   * `because` says on what it rests.
   */
  readonly published: { readonly answer: "published" | "not published" | "unknown"; readonly because: string }
  readonly quarantine: {
    readonly status: string
    readonly reason: string
    readonly position: string
    readonly quarantinedAt: string
    readonly resolvedBy: string | null
  } | null
}

interface Row {
  readonly record: Uint8Array | null
  readonly progress: string | null
  readonly q_status: string | null
  readonly q_reason: string | null
  readonly q_position: string | null
  readonly q_at: Date | null
  readonly q_by: string | null
}

const preview = (payload: Uint8Array): string => {
  const text = Buffer.from(payload.subarray(0, 200)).toString("utf8")
  // Printable UTF-8 as it is; anything else as hex.
  return /^[\P{C}\n\r\t]*$/u.test(text) && !text.includes("\uFFFD")
    ? `${text}${payload.byteLength > 200 ? "…" : ""}`
    : `0x${Buffer.from(payload.subarray(0, 64)).toString("hex")}${payload.byteLength > 64 ? "…" : ""}`
}

// One statement, one snapshot: the event's row, the relay's saved progress (only when it belongs to
// this cluster and is not past its WAL, as the relay reads it) and its quarantine row.
const query = (schema: string, prefix: string) => {
  const table = (name: string) => `"${schema}"."${prefix}${name}"`
  return `SELECT e.record,
            (SELECT position::text FROM ${table("log_progress")}
              WHERE slot = $2 AND system_identifier = (SELECT system_identifier::text FROM pg_control_system())
                AND position <= pg_current_wal_insert_lsn()) AS progress,
            q.status AS q_status, q.reason AS q_reason, q.position::text AS q_position,
            q.quarantined_at AS q_at, q.resolved_by AS q_by
       FROM (SELECT 1) one
       LEFT JOIN ${table("log_event")} e ON e.id = $1::uuid
       LEFT JOIN ${table("log_quarantine")} q ON q.slot = $2 AND q.event_id = $1::uuid::text`
}

const fromQuarantine = (status: string) =>
  status === "RETRIED"
    ? {
        answer: "published" as const,
        because: "the relay retried it from the quarantine and the broker acknowledged it"
      }
    : status === "RETRYING"
      ? { answer: "not published" as const, because: "the quarantine holds it; the relay is retrying it" }
      : {
          answer: "not published" as const,
          because: `the quarantine holds it (${status}): the broker never acknowledged it`
        }

// The event table keeps no commit position per row, and the relay's progress is a commit position:
// the database alone cannot place an event before or after it. The broker can.
const withoutBroker = (row: Row, slot: string) => ({
  answer: "unknown" as const,
  because: `the event table keeps no commit position per event, so the relay's saved progress (${
    row.progress ?? `none for slot ${slot}`
  }) cannot place it; pass --brokers or set KAFKA_BROKERS to ask the broker`
})

const read = (id: EventId, options: { readonly slot: string; readonly schema: string; readonly tablePrefix: string }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql
      .unsafe<Row>(query(options.schema, options.tablePrefix), [id, options.slot])
      .withoutTransform.pipe(
        Effect.mapError(
          (e) => new Operations.OperatorError({ reason: `${e.message} (are the log engine's migrations applied?)` })
        )
      )
    return row!
  })

const describe = (id: EventId, row: Row, slot: string) => {
  const decoded = row.record === null ? null : LogRecord.decode(row.record)
  const message = decoded === null || decoded instanceof LogRecord.LogRecordError ? null : decoded
  const invalid =
    decoded instanceof LogRecord.LogRecordError ? decoded.reason : message ? LogRecord.validate(message) : undefined
  const quarantine =
    row.q_status === null
      ? null
      : {
          status: row.q_status,
          reason: row.q_reason ?? "",
          position: row.q_position ?? "",
          quarantinedAt: row.q_at?.toISOString() ?? "",
          resolvedBy: row.q_by
        }
  const published =
    quarantine !== null
      ? fromQuarantine(quarantine.status)
      : row.record === null
        ? {
            answer: "unknown" as const,
            because: "the event table holds no such event, so there is no topic to ask the broker about"
          }
        : invalid !== undefined
          ? { answer: "not published" as const, because: `the relay never publishes an invalid event (${invalid})` }
          : withoutBroker(row, slot)
  return {
    report: {
      eventId: id,
      committed: row.record !== null,
      event:
        message === null
          ? null
          : {
              topic: message.topic,
              key: message.key,
              partition: message.partition,
              headers: message.headers,
              payloadBytes: message.payload.byteLength,
              payloadPreview: preview(message.payload),
              createdAt: new Date(message.createdAt).toISOString(),
              invalid: invalid ?? null
            },
      published,
      quarantine
    } satisfies EventReport,
    message
  }
}

const probeSkew = 60_000

// The broker's word: a record with this `event-id` header on the event's topic (its partition,
// or every partition), written at most a minute before the event's enqueue time (clock skew).
const askBroker = (report: EventReport, message: LogRecord.LogMessage) =>
  Effect.gen(function* () {
    const probe = yield* BrokerProbe
    const found = yield* probe.find({
      topic: message.topic,
      partition: message.partition,
      eventId: message.id,
      since: message.createdAt - probeSkew
    })
    const where = `topic ${message.topic}${message.partition === null ? "" : ` partition ${message.partition}`}`
    const published = Option.match(found, {
      onNone: () => ({
        answer: "not published" as const,
        because: `the broker holds no record with this event id on ${where}, read from ${new Date(
          message.createdAt - probeSkew
        ).toISOString()} to its end (a record the topic's retention deleted is not found either)`
      }),
      onSome: (receipt) => ({
        answer: "published" as const,
        because: `the broker holds it: ${receipt.topic} partition ${receipt.partition} offset ${receipt.offset}`
      })
    })
    return { ...report, published } satisfies EventReport
  })

/**
 * The event's report: from the database, then, when brokers are configured and the event is in
 * the table and not in the quarantine, from the broker.
 *
 * @since 0.1.0
 * @category operations
 */
export const inspectEvent = (config: RootConfig, input: { readonly eventId: string; readonly slot: string }) =>
  Effect.gen(function* () {
    const id = yield* Operations.parseId(input.eventId)
    const options = { slot: input.slot, schema: config.schema, tablePrefix: config.tablePrefix }
    const row = yield* read(id, options).pipe(Effect.provide(database(config)))
    const { message, report } = describe(id, row, input.slot)
    if (message === null || report.quarantine !== null || report.event?.invalid || Option.isNone(config.brokers)) {
      return report
    }
    return yield* askBroker(report, message).pipe(Effect.provide(reachableBroker(config)))
  })

const render = (r: EventReport): string => {
  const e = r.event
  const q = r.quarantine
  return [
    `event ${r.eventId}`,
    r.committed
      ? `committed: yes (a row of the event table)${e?.invalid ? `, invalid: ${e.invalid}` : ""}`
      : "committed: no (no row in the event table: never committed, rolled back, or its partition was dropped by retention)",
    ...(e === null
      ? []
      : [
          `  topic ${e.topic}, key ${e.key ?? "-"}, partition ${e.partition ?? "-"}, created ${e.createdAt}`,
          `  headers ${JSON.stringify(e.headers)}`,
          `  payload (${e.payloadBytes} bytes) ${e.payloadPreview}`
        ]),
    `published: ${r.published.answer} (${r.published.because})`,
    q === null
      ? "quarantined: no"
      : `quarantined: ${q.status} at ${q.quarantinedAt}, position ${q.position}${q.resolvedBy ? `, by ${q.resolvedBy}` : ""}: ${q.reason}`
  ].join("\n")
}

/**
 * `log inspect <event-id>`, with the log commands' `--slot` flag.
 *
 * @since 0.1.0
 * @category commands
 */
export const makeInspect = (slot: Flag.Flag<string>) =>
  Command.make(
    "inspect",
    { slot, eventId: Argument.String("event-id").pipe(Argument.withDescription("the event's id (a UUID)")) },
    (input) =>
      Effect.gen(function* () {
        const config: RootConfig = yield* root
        const report = yield* inspectEvent(config, input)
        yield* Console.log(config.json ? JSON.stringify(report, null, 2) : render(report))
      }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))
  ).pipe(
    Command.withDescription(
      "one event of the log engine: committed (in the event table), published (asks the broker; needs --brokers), quarantined"
    )
  )
