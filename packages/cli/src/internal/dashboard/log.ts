import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Effect from "effect/Effect"
import { HttpRouter } from "effect/http"
import { slotReport } from "../../commands/Log.ts"
import { escapeHtml, table } from "../../DashboardHtml.ts"
import { type Context, errorMessage } from "./shared.ts"

const mib = (bytes: number | null) =>
  bytes === null ? "unlimited" : Number.isNaN(bytes) ? "-" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`

/**
 * `/log`: the log relay's slot and its quarantine, read only. The repairs (retry, skip, republish)
 * stay in the CLI, where each is a dry run first.
 */
export const routes = (ctx: Context, slot: string) => [
  HttpRouter.route(
    "GET",
    "/log",
    ctx.guarded(() =>
      Effect.gen(function* () {
        const tables = yield* PgTables.PgTables
        const options = { slot, schema: tables.schema, tablePrefix: tables.tablePrefix }
        // A missing slot (or a database without logical decoding) is shown, not a failed page.
        const slotPart = yield* slotReport(options).pipe(
          Effect.map(
            (r) =>
              `<p id="log-slot">slot <b>${escapeHtml(r.slot)}</b>: wal_status ${escapeHtml(r.walStatus ?? "-")}, lag ${mib(
                r.lagBytes
              )}, retained ${mib(r.retainedBytes)}, safe ${mib(r.safeWalBytes)}<br>relay progress: ${escapeHtml(
                r.progress ?? "none saved"
              )}<br>quarantine: ${r.quarantined} quarantined, ${r.held} held</p>`
          ),
          Effect.catch((error: unknown) =>
            Effect.succeed(
              `<p id="log-slot" class="empty">slot ${escapeHtml(slot)}: ${escapeHtml(errorMessage(error))}</p>`
            )
          )
        )
        const events = yield* PgLogQuarantine.list({ ...options, limit: 500 })
        const rows = events.map((e) =>
          [
            e.eventId,
            e.status,
            e.topic,
            e.key ?? "-",
            e.position,
            e.quarantinedAt.toISOString(),
            e.resolvedBy ?? "-",
            e.reason
          ].map(escapeHtml)
        )
        return yield* ctx.render(
          "Log engine",
          `<h1>Log engine</h1>${slotPart}<h2>Quarantine</h2>${table(
            ["event id", "status", "topic", "key", "position", "quarantined at", "resolved by", "reason"],
            rows,
            ' id="log-quarantine"'
          )}<p>Retry or skip with <code>effect-outbox log quarantine retry|skip --event-id ID</code>; see one event with <code>effect-outbox log inspect ID</code>.</p>`
        )
      })
    )
  )
]
