import * as Effect from "effect/Effect"
import { HttpServerRequest, HttpServerResponse, UrlParams } from "effect/http"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Guard from "../../DashboardGuard.ts"
import * as Html from "../../DashboardHtml.ts"
import * as Pages from "../../DashboardPages.ts"
import * as Operations from "../../Operations.ts"

export const securityHeaders = {
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

/** Ids typed into a form: separated by blanks or commas. */
export const ids = (values: ReadonlyArray<string>) =>
  values
    .flatMap((v) => v.split(/[\s,]+/))
    .map((v) => v.trim())
    .filter((v) => v !== "")

export const first = (form: UrlParams.UrlParams, name: string): string | undefined =>
  Option.getOrUndefined(UrlParams.getFirst(form, name))

export const errorMessage = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)

type Handler<E, R> = (
  request: HttpServerRequest.HttpServerRequest,
  url: URL
) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * What every route of one dashboard shares: its settings, where it is mounted, its CSRF token,
 * the page frame, the audit log, and the guard around each route.
 */
export const makeContext = (settings: Guard.Settings, base: string) =>
  Effect.gen(function* () {
    const csrf = Guard.makeCsrfToken()
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

    // A token given once in the address moves to a cookie, off the address bar and the history.
    const acceptToken = (request: HttpServerRequest.HttpServerRequest, token: string) => {
      // Back to the address as requested (a mounted router strips its prefix from `url`).
      const original = new URL(request.originalUrl, "http://dashboard.invalid")
      original.searchParams.delete("token")
      return HttpServerResponse.redirect(`${original.pathname}${original.search}`, {
        headers: {
          "set-cookie": `${Guard.tokenCookie}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`
        }
      })
    }

    /** The guard around every route: the connection, the Host, the token, then the handler; failures as pages. */
    const guarded = <E, R>(handler: Handler<E, R>) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const headers = request.headers as Readonly<Record<string, string | undefined>>
        // The transport peer, not `remoteAddress`: a forwarding middleware may have rewritten that.
        const refused = Guard.refuseConnection(settings, Option.getOrUndefined(request.peerAddress), headers)
        if (refused !== undefined) return HttpServerResponse.text(refused, { status: 403 })
        if (!Guard.hostAllowed(settings, headers.host)) {
          return HttpServerResponse.text("unknown Host", { status: 421 })
        }
        const url = new URL(request.url, "http://dashboard.invalid")
        if (!Guard.mayRead(settings.token, headers)) {
          const given = url.searchParams.get("token") ?? undefined
          if (settings.token !== undefined && Guard.sameSecret(given, settings.token)) {
            return acceptToken(request, settings.token)
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

    return { settings, base, csrf, audit, render, recordAudit, guarded, mutation }
  })

/** The shared part of one dashboard's routes. */
export type Context = Effect.Success<ReturnType<typeof makeContext>>
