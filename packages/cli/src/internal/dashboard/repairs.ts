import * as Effect from "effect/Effect"
import { HttpRouter, UrlParams } from "effect/http"
import * as Ref from "effect/Ref"
import * as Pages from "../../DashboardPages.ts"
import * as Operations from "../../Operations.ts"
import { type Context, ids } from "./shared.ts"

const repairRequest = (get: (name: string) => ReadonlyArray<string>): Pages.RepairRequest => {
  const action = get("action")[0] as Pages.RepairAction | undefined
  const limit = Number(get("limit")[0] ?? "100")
  return {
    action: action !== undefined && Pages.repairActions.includes(action) ? action : "requeue",
    ids: ids(get("ids")),
    topic: (get("topic")[0] ?? "").trim(),
    limit: Number.isInteger(limit) && limit > 0 ? limit : 100,
    operator: (get("operator")[0] ?? "").trim(),
    reason: (get("reason")[0] ?? "").trim()
  }
}

const selection = (request: Pages.RepairRequest): Operations.Selection => ({
  ids: request.ids,
  topic: request.topic === "" ? undefined : request.topic,
  limit: request.limit
})

const outcomeLines = (report: Operations.ChangeReport) => {
  const applied = report.outcomes.filter((o) => o.outcome === "applied").length
  return [
    `${report.action}: ${applied} of ${report.selected.length} selected row(s) changed`,
    ...report.outcomes.filter((o) => o.outcome !== "applied").map((o) => `${o.id}: ${o.outcome}`)
  ]
}

const staleLines = (report: Operations.StaleReport) =>
  report.result === null
    ? ["no expired lease"]
    : report.result.heldBy !== undefined
      ? [`nothing changed: a recovery is running (${report.result.heldBy})`]
      : [
          `${report.result.stale} expired lease(s): ${report.result.found} found on the broker (published), ${report.result.requeued} requeued, ${report.result.gaveUp} gave up, ${report.result.failed} failed, ${report.result.left} left`
        ]

/** The repair, through the same operations as the CLI; a dry run unless `execute`. */
const runRepair = (request: Pages.RepairRequest, execute: boolean) => {
  const audited = { ...selection(request), operator: request.operator, reason: request.reason, execute }
  const change = (report: Operations.ChangeReport) => ({ rows: report.selected, lines: outcomeLines(report) })
  switch (request.action) {
    case "requeue":
      return Effect.map(Operations.requeue(audited), change)
    case "skip":
      return Effect.map(Operations.skip(audited), change)
    case "release":
      return Effect.map(Operations.release({ ...selection(request), operator: request.operator, execute }), change)
    case "recover-stale":
      return execute
        ? Effect.map(Operations.recoverStale({ limit: request.limit }), (r) => ({
            rows: r.stale,
            lines: staleLines(r)
          }))
        : Effect.map(Operations.listStale({ limit: request.limit }), (r) => ({ rows: r.stale, lines: [] }))
  }
}

/** `/repairs`: the form, its dry run, and the audited execution. */
export const routes = (ctx: Context) => [
  HttpRouter.route(
    "GET",
    "/repairs",
    ctx.guarded((_, url) =>
      Effect.gen(function* () {
        const request = repairRequest((name) => url.searchParams.getAll(name))
        if (ctx.settings.readOnly) return yield* ctx.render("Repairs", Pages.error("the dashboard is read-only"))
        return yield* ctx.render(
          "Repairs",
          Pages.repairs({ base: ctx.base, request, audit: yield* Ref.get(ctx.audit) })
        )
      })
    )
  ),
  HttpRouter.route(
    "GET",
    "/repairs/preview",
    ctx.guarded((_, url) =>
      Effect.gen(function* () {
        const request = repairRequest((name) => url.searchParams.getAll(name))
        const { rows } = yield* runRepair(request, false)
        return yield* ctx.render(
          "Dry run",
          Pages.repairPreview({ base: ctx.base, request, rows, csrf: ctx.csrf, readOnly: ctx.settings.readOnly })
        )
      })
    )
  ),
  HttpRouter.route(
    "POST",
    "/repairs/execute",
    ctx.mutation((form) =>
      Effect.gen(function* () {
        const request = repairRequest((name) => UrlParams.getAll(form, name))
        const { lines } = yield* runRepair(request, true)
        yield* ctx.recordAudit(`${request.action} by ${request.operator} (${request.reason}): ${lines.join("; ")}`)
        return yield* ctx.render("Done", Pages.result({ base: ctx.base, title: `${request.action}: done`, lines }))
      })
    )
  )
]
