/**
 * The log engine's commands: `log slot [--create]` — the slot's state, and the setup step that
 * creates it (after a fail-over); `log quarantine list|retry|skip` — events the log relay moved
 * aside because the broker refused them for good or the log flagged them invalid.
 *
 * @since 0.1.0
 */

import * as PgLogGauges from "@effect-outbox/adapter-pg/PgLogGauges"
import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import { type QuarantineStatus, statuses } from "@effect-outbox/core/LogQuarantine"
import * as Config from "effect/Config"
import { Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as Operations from "../Operations.ts"
import { makeInspect } from "./LogInspect.ts"
import { republishCommand } from "./LogRepublish.ts"
import { root, selectionFlags, userError, withDatabase } from "./Root.ts"

const slot = Flag.String("slot").pipe(
  Flag.withDescription("the log relay's replication slot (default: $OUTBOX_LOG_SLOT or effect_outbox_log)"),
  Flag.withFallbackConfig(Config.String("OUTBOX_LOG_SLOT")),
  Flag.withDefault(PgLogSource.defaultSlot)
)

const eventId = Flag.String("event-id").pipe(Flag.withDescription("the quarantined event"))

const cell = (value: string | null) => value ?? "-"

const renderEvents = (events: ReadonlyArray<PgLogQuarantine.QuarantinedEvent>): string => {
  if (events.length === 0) return "the quarantine is empty"
  const header = ["event id", "status", "topic", "key", "position", "quarantined at", "resolved by", "reason"]
  const rows = events.map((e) => [
    e.eventId,
    e.status,
    e.topic,
    cell(e.key),
    e.position,
    e.quarantinedAt.toISOString(),
    cell(e.resolvedBy),
    e.reason
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

const renderPlan = (plan: PgLogQuarantine.Plan): string =>
  `${plan.executed ? "moved" : "would move (dry run; add --execute)"} ${plan.events.length} event(s) to ${plan.to}:\n${renderEvents(plan.events)}`

const options = (input: { readonly slot: string }) =>
  Effect.map(root, (config) => ({ slot: input.slot, schema: config.schema, tablePrefix: config.tablePrefix }))

const list = Command.make(
  "list",
  {
    slot,
    status: Flag.String("status").pipe(
      Flag.withDescription(`only these statuses, comma separated (${statuses.join(", ")})`),
      Flag.optional
    ),
    limit: Flag.Int("limit").pipe(Flag.withDescription("at most this many"), Flag.withDefault(1000))
  },
  (input) =>
    Effect.gen(function* () {
      const wanted = Option.map(input.status, (s) =>
        s
          .split(",")
          .map((x) => x.trim().toUpperCase())
          .filter((x) => x !== "")
      )
      const unknown = Option.getOrElse(wanted, () => []).filter((s) => !(statuses as ReadonlyArray<string>).includes(s))
      if (unknown.length > 0) {
        return yield* userError(new Operations.OperatorError({ reason: `unknown status ${unknown.join(", ")}` }))
      }
      const base = yield* options(input)
      const status = Option.getOrUndefined(wanted) as ReadonlyArray<QuarantineStatus> | undefined
      yield* withDatabase(PgLogQuarantine.list({ ...base, status, limit: input.limit }), renderEvents)
    })
).pipe(Command.withDescription("the log relay's quarantined and held events, in log order"))

const retry = Command.make(
  "retry",
  { slot, eventId, operator: selectionFlags.operator, execute: selectionFlags.execute },
  (input) =>
    Effect.gen(function* () {
      const base = yield* options(input)
      const request = { ...base, eventId: input.eventId, by: input.operator, execute: input.execute }
      yield* withDatabase(PgLogQuarantine.retry(request), renderPlan)
    })
).pipe(
  Command.withDescription(
    "publish a quarantined event again with its key's held events, in log order, once the cause is fixed (dry run unless --execute)"
  )
)

const skip = Command.make(
  "skip",
  { slot, eventId, operator: selectionFlags.operator, execute: selectionFlags.execute },
  (input) =>
    Effect.gen(function* () {
      const base = yield* options(input)
      const request = { ...base, eventId: input.eventId, by: input.operator, execute: input.execute }
      yield* withDatabase(PgLogQuarantine.skip(request), renderPlan)
    })
).pipe(
  Command.withDescription(
    "drop a quarantined event for good; its key's held events are then published (dry run unless --execute)"
  )
)

/**
 * The slot as the server sees it, the relay's progress and the quarantine's open events.
 *
 * @since 0.1.0
 * @category models
 */
export interface SlotReport {
  readonly slot: string
  readonly lagBytes: number
  readonly retainedBytes: number
  readonly walStatus: string | null
  readonly safeWalBytes: number | null
  readonly progress: string | null
  readonly quarantined: number
  readonly held: number
}

/**
 * The slot's gauges, the relay's saved progress and the quarantine's open counts.
 *
 * @since 0.1.0
 * @category operations
 */
export const slotReport = (options: { readonly slot: string; readonly schema: string; readonly tablePrefix: string }) =>
  Effect.gen(function* () {
    const gauges = yield* PgLogGauges.sample(options.slot)
    const sql = yield* SqlClient.SqlClient
    const table = (name: string) => `"${options.schema}"."${options.tablePrefix}${name}"`
    const [row] = yield* sql
      .unsafe<{ progress: string | null; quarantined: number; held: number }>(
        `SELECT (SELECT position::text FROM ${table("log_progress")} WHERE slot = $1) AS progress,
                (SELECT count(*)::int FROM ${table("log_quarantine")} WHERE slot = $1 AND status = 'QUARANTINED') AS quarantined,
                (SELECT count(*)::int FROM ${table("log_quarantine")} WHERE slot = $1 AND status = 'HELD') AS held`,
        [options.slot]
      )
      .withoutTransform.pipe(
        Effect.mapError(
          (e) => new Operations.OperatorError({ reason: `${e.message} (are migrations 8 and 9 applied?)` })
        )
      )
    return {
      slot: options.slot,
      lagBytes: gauges.lagBytes,
      retainedBytes: gauges.retainedBytes,
      walStatus: gauges.walStatus ?? null,
      safeWalBytes: gauges.safeWalBytes ?? null,
      progress: row?.progress ?? null,
      quarantined: row?.quarantined ?? 0,
      held: row?.held ?? 0
    } satisfies SlotReport
  })

const mib = (bytes: number | null) =>
  bytes === null ? "unlimited" : Number.isNaN(bytes) ? "-" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`

const renderSlot = (r: SlotReport): string =>
  [
    `slot ${r.slot}: wal_status ${r.walStatus ?? "-"}, lag ${mib(r.lagBytes)}, retained ${mib(r.retainedBytes)}, safe ${mib(r.safeWalBytes)}`,
    `relay progress: ${r.progress ?? "none saved"}`,
    `quarantine: ${r.quarantined} quarantined, ${r.held} held`
  ].join("\n")

const create = Flag.Boolean("create").pipe(
  Flag.withDescription(
    "create the slot (and its publication) first when missing, e.g. on a new primary after a fail-over: the relay then reads the gap back from the event table"
  ),
  Flag.withDefault(false)
)

const slotCommand = Command.make("slot", { slot, create }, (input) =>
  Effect.gen(function* () {
    const base = yield* options(input)
    const report = slotReport(base)
    yield* withDatabase(input.create ? Effect.andThen(PgLogSource.ensureSlot(base), report) : report, renderSlot)
  })
).pipe(
  Command.withDescription(
    "the log relay's slot: WAL status, lag and retained WAL, saved progress, quarantine (--create: create it when missing)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const log = Command.make("log").pipe(
  Command.withDescription("the log engine: slot, quarantine, inspect an event, republish a range"),
  Command.withSubcommands([
    slotCommand,
    makeInspect(slot),
    republishCommand,
    Command.make("quarantine").pipe(
      Command.withDescription("events the log relay moved aside: list, retry, skip"),
      Command.withSubcommands([list, retry, skip])
    )
  ])
)
