/**
 * The operator dashboard: the CLI's operations on a web page, served by Effect's HTTP server.
 * One implementation, two front ends: every read and every repair goes through `Operations`,
 * exactly as the CLI's commands do.
 *
 * - {@link routes}: a `Layer` adding the dashboard's routes to an `HttpRouter`, for a service to
 *   mount in its own Effect HTTP server (under a `prefix`).
 * - {@link layer}: a stand-alone server on `host:port` (what `effect-outbox dashboard` runs).
 *
 * Safety rules: `DashboardGuard`.
 *
 * @since 0.2.0
 */
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse, UrlParams } from "effect/http"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Guard from "./DashboardGuard.ts"
import * as Html from "./DashboardHtml.ts"
import * as Pages from "./DashboardPages.ts"
import * as Samples from "./DashboardSamples.ts"
import * as Operations from "./Operations.ts"
import type { ReadModel } from "./ReadModel.ts"

/**
 * @since 0.2.0
 * @category models
 */
export interface Options {
  /** The address the dashboard is reached at (default `127.0.0.1`); beyond loopback a token is required. */
  readonly host?: string | undefined
  /** Access token, required beyond loopback (16+ characters). */
  readonly token?: string | undefined
  /** Offer and accept no mutation. */
  readonly readOnly?: boolean | undefined
  /** Where the routes are mounted, e.g. `/outbox` (default: the root). */
  readonly prefix?: string | undefined
  /** Consumer groups whose lag the overview shows. */
  readonly groups?: ReadonlyArray<string> | undefined
  /** How often the live stream and the chart sample the counts (default 5 s). */
  readonly refresh?: Duration.Input | undefined
  /** How much history the chart shows (default 10 min). */
  readonly window?: Duration.Input | undefined
  /** How long the overview waits for the broker before showing it as unavailable (default 5 s). */
  readonly brokerTimeout?: Duration.Input | undefined
}

const securityHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  // Not `no-referrer`: with it a browser sends `Origin: null` on form posts, which the guard refuses.
  "referrer-policy": "same-origin",
  "cache-control": "no-store"
}

const htmlResponse = (body: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType: "text/html; charset=utf-8", headers: securityHeaders })

const ids = (values: ReadonlyArray<string>) =>
  values
    .flatMap((v) => v.split(/[\s,]+/))
    .map((v) => v.trim())
    .filter((v) => v !== "")

const first = (form: UrlParams.UrlParams, name: string): string | undefined =>
  Option.getOrUndefined(UrlParams.getFirst(form, name))

const errorMessage = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)

/**
 * The dashboard's routes as a `Layer` on an `HttpRouter`: mount it in a service's own server
 * with `HttpRouter.serve`. Fails with `DashboardConfigError` for an unsafe setting.
 *
 * @since 0.2.0
 * @category layers
 */
export const routes = (options: Options = {}) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const settings: Guard.Settings = {
        host: options.host ?? "127.0.0.1",
        token: options.token,
        readOnly: options.readOnly ?? false
      }
      const invalid = Guard.validate(settings)
      if (invalid !== undefined) return yield* invalid
      const base = (options.prefix ?? "").replace(/\/$/, "")
      const csrf = Guard.makeCsrfToken()
      const refresh = Duration.fromInputUnsafe(options.refresh ?? "5 seconds")
      const windowMillis = Duration.toMillis(Duration.fromInputUnsafe(options.window ?? "10 minutes"))
      const brokerTimeout = Duration.fromInputUnsafe(options.brokerTimeout ?? "5 seconds")
      const samples = yield* Ref.make<ReadonlyArray<Samples.Sample>>([])
      const audit = yield* Ref.make<ReadonlyArray<string>>([])

      const render = (title: string, body: string, status = 200) =>
        Effect.succeed(htmlResponse(Html.page({ base, title, readOnly: settings.readOnly, body }), status))

      /** An audit line for the page's log and the process log (the action's own audit line comes from core). */
      const recordAudit = (line: string) =>
        Effect.gen(function* () {
          yield* Ref.update(audit, (lines) => [`${new Date().toISOString()} ${line}`, ...lines].slice(0, 50))
          yield* Effect.logWarning(`AUDIT outbox dashboard ${line}`).pipe(
            Effect.annotateLogs({ audit: "outbox.dashboard" })
          )
        })

      const status = Operations.status({})
      const broker = (topics: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const consumerLag = yield* Operations.consumerLag({ groups: options.groups ?? [], topics })
          const deadLetters = yield* Operations.deadLetterDepth(topics)
          return { _tag: "Answered", consumerLag, deadLetters } satisfies Pages.BrokerView
        }).pipe(
          Effect.timeout(brokerTimeout),
          Effect.catch((error) =>
            Effect.succeed<Pages.BrokerView>({ _tag: "Unavailable", reason: errorMessage(error) })
          )
        )

      // Only the sampler appends: the chart's points stay evenly spaced however many pages watch.
      const sample = Effect.gen(function* () {
        const report = yield* status
        const next = Samples.fromCounts(report.now, report.byStatus)
        yield* Ref.update(samples, (all) => Samples.append(all, next, windowMillis))
      })

      const overviewContent = Effect.gen(function* () {
        const report = yield* status
        const all = yield* Ref.get(samples)
        const brokerView = yield* broker(report.topics.map((t) => t.topic))
        return Pages.overview({
          base,
          status: report,
          broker: brokerView,
          samples: all,
          windowMillis,
          readOnly: settings.readOnly
        })
      })

      // -- the guard around every route -------------------------------------------------------

      type Handler<E, R> = (
        request: HttpServerRequest.HttpServerRequest,
        url: URL
      ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

      const guarded = <E, R>(handler: Handler<E, R>) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const headers = request.headers as Readonly<Record<string, string | undefined>>
          if (!Guard.hostAllowed(settings, headers.host)) {
            return HttpServerResponse.text("unknown Host", { status: 421 })
          }
          const url = new URL(request.url, "http://dashboard.invalid")
          if (!Guard.mayRead(settings.token, headers)) {
            const given = url.searchParams.get("token") ?? undefined
            if (settings.token !== undefined && Guard.sameSecret(given, settings.token)) {
              // Back to the address as requested (a mounted router strips its prefix from `url`).
              const original = new URL(request.originalUrl, "http://dashboard.invalid")
              original.searchParams.delete("token")
              // The token moves to a cookie, off the address bar and out of the history.
              return HttpServerResponse.redirect(`${original.pathname}${original.search}`, {
                headers: {
                  "set-cookie": `${Guard.tokenCookie}=${encodeURIComponent(settings.token)}; HttpOnly; SameSite=Strict; Path=/`
                }
              })
            }
            return HttpServerResponse.text("this dashboard needs its token (open it once with ?token=...)", {
              status: 401
            })
          }
          return yield* handler(request, url).pipe(
            // A request to correct answers 400; anything else (database, broker) 500, with its message.
            Effect.catch((error: unknown) =>
              error instanceof Operations.OperatorError
                ? render("Not done", Pages.error(error.message), 400)
                : render("Failed", Pages.error(errorMessage(error)), 500)
            )
          )
        })

      /** A POST that changes something: the guard's mutation rules first, then the form. */
      const mutation = <E, R>(
        handler: (form: UrlParams.UrlParams) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
      ) =>
        guarded((request) =>
          Effect.gen(function* () {
            const form = yield* request.urlParamsBody
            const refused = Guard.refuseMutation(settings, csrf, {
              headers: request.headers as Readonly<Record<string, string | undefined>>,
              csrf: first(form, "csrf")
            })
            if (refused !== undefined) return yield* render("Refused", Pages.error(`refused: ${refused}`), 403)
            if (first(form, "confirm") !== "yes") {
              return yield* render("Not done", Pages.error("not confirmed"), 400)
            }
            const operator = (first(form, "operator") ?? "").trim()
            const reason = (first(form, "reason") ?? "").trim()
            if (operator === "" || reason === "") {
              return yield* render(
                "Not done",
                Pages.error("name the operator and the reason: the action is audited"),
                400
              )
            }
            return yield* handler(form)
          })
        )

      // -- repairs ----------------------------------------------------------------------------

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

      /** The repair, through the same operations as the CLI; a dry run unless `execute`. */
      const runRepair = (request: Pages.RepairRequest, execute: boolean) => {
        switch (request.action) {
          case "requeue":
            return Effect.map(
              Operations.requeue({
                ...selection(request),
                operator: request.operator,
                reason: request.reason,
                execute
              }),
              (r) => ({ rows: r.selected, lines: outcomeLines(r) })
            )
          case "skip":
            return Effect.map(
              Operations.skip({ ...selection(request), operator: request.operator, reason: request.reason, execute }),
              (r) => ({ rows: r.selected, lines: outcomeLines(r) })
            )
          case "release":
            return Effect.map(
              Operations.release({ ...selection(request), operator: request.operator, execute }),
              (r) => ({ rows: r.selected, lines: outcomeLines(r) })
            )
          case "recover-stale":
            return execute
              ? Effect.map(Operations.recoverStale({ limit: request.limit }), (r) => ({
                  rows: r.stale,
                  lines:
                    r.result === null
                      ? ["no expired lease"]
                      : r.result.heldBy !== undefined
                        ? [`nothing changed: a recovery is running (${r.result.heldBy})`]
                        : [
                            `${r.result.stale} expired lease(s): ${r.result.found} found on the broker (published), ${r.result.requeued} requeued, ${r.result.gaveUp} gave up, ${r.result.failed} failed, ${r.result.left} left`
                          ]
                }))
              : Effect.map(Operations.listStale({ limit: request.limit }), (r) => ({ rows: r.stale, lines: [] }))
        }
      }

      const outcomeLines = (report: Operations.ChangeReport) => {
        const applied = report.outcomes.filter((o) => o.outcome === "applied").length
        return [
          `${report.action}: ${applied} of ${report.selected.length} selected row(s) changed`,
          ...report.outcomes.filter((o) => o.outcome !== "applied").map((o) => `${o.id}: ${o.outcome}`)
        ]
      }

      // -- dead letters -----------------------------------------------------------------------

      const outboxTopics = Effect.map(status, (report) => report.topics.map((t) => t.topic))

      const replayPreview = (topic: string, eventIds: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          if (topic === "") return yield* new Operations.OperatorError({ reason: "name the dead-letter topic" })
          const report = yield* Operations.replay({ from: topic, eventIds, all: false, execute: false })
          return yield* render(
            "Replay",
            Pages.replayPreview({ base, topic, report, csrf, readOnly: settings.readOnly })
          )
        })

      // -- the routes -------------------------------------------------------------------------

      const list = [
        HttpRouter.route(
          "GET",
          "/",
          guarded(() => Effect.flatMap(overviewContent, (content) => render("Overview", Pages.overviewPage(content))))
        ),
        HttpRouter.route(
          "GET",
          "/events",
          guarded(() =>
            Effect.map(Effect.context<OutboxStore | ReadModel | BrokerAdmin>(), (context) =>
              HttpServerResponse.stream(
                Stream.fromEffectSchedule(
                  overviewContent.pipe(
                    Effect.map(
                      (content) =>
                        `event: overview\n${content
                          .split("\n")
                          .map((l) => `data: ${l}`)
                          .join("\n")}\n\n`
                    ),
                    Effect.catch((error) =>
                      Effect.succeed(`event: failure\ndata: ${errorMessage(error).replaceAll("\n", " ")}\n\n`)
                    )
                  ),
                  Schedule.spaced(refresh)
                ).pipe(Stream.encodeText, Stream.provideContext(context)),
                { contentType: "text/event-stream", headers: { ...securityHeaders, "x-accel-buffering": "no" } }
              )
            )
          )
        ),
        HttpRouter.route(
          "GET",
          "/rows/:id",
          guarded(() =>
            Effect.gen(function* () {
              const params = yield* HttpRouter.params
              const inspection = yield* Operations.inspect(params.id ?? "")
              return yield* render(`Event ${inspection.message.id}`, Pages.row(base, inspection, settings.readOnly))
            })
          )
        ),
        HttpRouter.route(
          "GET",
          "/dead-letters",
          guarded((_, url) =>
            Effect.gen(function* () {
              const topic = (url.searchParams.get("topic") ?? "").trim()
              if (topic === "") {
                const depths = yield* Operations.deadLetterDepth(yield* outboxTopics)
                return yield* render("Dead letters", Pages.deadLetterTopics(base, depths))
              }
              const letters = yield* Operations.deadLetters(topic, { limit: 500 })
              return yield* render("Dead letters", Pages.deadLetterList(base, topic, letters, settings.readOnly))
            })
          )
        ),
        HttpRouter.route(
          "GET",
          "/dead-letters/replay",
          guarded((_, url) =>
            replayPreview((url.searchParams.get("topic") ?? "").trim(), url.searchParams.getAll("eventId"))
          )
        ),
        HttpRouter.route(
          "POST",
          "/dead-letters/replay",
          mutation((form) =>
            Effect.gen(function* () {
              const topic = (first(form, "topic") ?? "").trim()
              const eventIds = UrlParams.getAll(form, "eventId").filter((id) => id !== "")
              const operator = first(form, "operator") ?? ""
              const reason = first(form, "reason") ?? ""
              if (eventIds.length === 0)
                return yield* new Operations.OperatorError({ reason: "select dead letters to replay" })
              const report = yield* Operations.replay({ from: topic, eventIds, all: false, execute: true })
              const failed = report.result?.failed ?? []
              const line = `replay by ${operator} (${reason}): ${report.result?.replayed.length ?? 0} of ${report.selected.length} dead letter(s) from ${topic}`
              yield* recordAudit(line)
              return yield* render(
                "Replayed",
                Pages.result({
                  base,
                  title: "Replayed",
                  lines: [
                    line,
                    ...failed.map(
                      (f) =>
                        `${f.deadLetter.eventId ?? "?"}: the broker refused it (${f.error.message}); replay it again`
                    )
                  ]
                })
              )
            })
          )
        ),
        HttpRouter.route(
          "GET",
          "/repairs",
          guarded((_, url) =>
            Effect.gen(function* () {
              const request = repairRequest((name) => url.searchParams.getAll(name))
              if (settings.readOnly) return yield* render("Repairs", Pages.error("the dashboard is read-only"))
              return yield* render("Repairs", Pages.repairs({ base, request, audit: yield* Ref.get(audit) }))
            })
          )
        ),
        HttpRouter.route(
          "GET",
          "/repairs/preview",
          guarded((_, url) =>
            Effect.gen(function* () {
              const request = repairRequest((name) => url.searchParams.getAll(name))
              const { rows } = yield* runRepair(request, false)
              return yield* render(
                "Dry run",
                Pages.repairPreview({ base, request, rows, csrf, readOnly: settings.readOnly })
              )
            })
          )
        ),
        HttpRouter.route(
          "POST",
          "/repairs/execute",
          mutation((form) =>
            Effect.gen(function* () {
              const request = repairRequest((name) => UrlParams.getAll(form, name))
              const { lines } = yield* runRepair(request, true)
              yield* recordAudit(`${request.action} by ${request.operator} (${request.reason}): ${lines.join("; ")}`)
              return yield* render("Done", Pages.result({ base, title: `${request.action}: done`, lines }))
            })
          )
        ),
        HttpRouter.route(
          "GET",
          "/assets/dashboard.css",
          HttpServerResponse.text(Html.css, { contentType: "text/css; charset=utf-8", headers: securityHeaders })
        ),
        HttpRouter.route(
          "GET",
          "/assets/dashboard.js",
          HttpServerResponse.text(Html.js, { contentType: "text/javascript; charset=utf-8", headers: securityHeaders })
        )
      ]

      // The chart's samples accrue while nobody watches, so a page opened at 3 a.m. has a history.
      const sampler = Layer.effectDiscard(
        Effect.forkScoped(sample.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(refresh))))
      )
      return Layer.merge(HttpRouter.addAll(list, base === "" ? {} : { prefix: base }), sampler)
    })
  )

/**
 * A stand-alone dashboard server on `host:port` (default `127.0.0.1`, port 0 picks a free one),
 * logging its address; needs the outbox's services (database and broker).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: Options & { readonly port?: number | undefined }) =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: true }).pipe(
    Layer.provideMerge(
      NodeHttpServer.layer(createServer, { port: options.port ?? 0, host: options.host ?? "127.0.0.1" })
    )
  )

/**
 * The address a running dashboard answers on, e.g. `http://127.0.0.1:7070`.
 *
 * @since 0.2.0
 * @category layers
 */
export const url = (prefix = ""): Effect.Effect<string, never, HttpServer.HttpServer> =>
  Effect.map(HttpServer.HttpServer, (server) => `${HttpServer.formatAddress(server.address)}${prefix}`)
