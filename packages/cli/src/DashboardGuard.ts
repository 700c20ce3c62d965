/**
 * The dashboard's safety rules, in one place: where it may listen, who may read it, and which
 * requests may change anything.
 *
 * - Without a token it answers only connections from this machine: the socket's peer address
 *   is loopback and no proxy header says the request was relayed. The `Host` header is chosen by
 *   the client, so it never grants access. A stand-alone server beyond loopback needs a token.
 * - With a token, every request carries it (`Authorization: Bearer`, or the `HttpOnly`,
 *   `SameSite=Strict` cookie set once from `?token=`); compared in constant time.
 * - A mutation is a `POST` that passes the read rule above (so the token, when there is one),
 *   carries this process's CSRF token and whose `Origin` (or, without one, `Sec-Fetch-Site`) is
 *   this site; without a token, a `Host` that is not a loopback name (DNS rebinding) is refused.
 * - Read-only mode refuses every mutation.
 *
 * @since 0.1.0
 */
import { randomBytes, timingSafeEqual } from "node:crypto"
import { isIP } from "node:net"
import * as Schema from "effect/Schema"

/**
 * A dashboard setting that would expose it unsafely.
 *
 * @since 0.1.0
 * @category errors
 */
export class DashboardConfigError extends Schema.TaggedError<DashboardConfigError>()("DashboardConfigError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Address to listen on (default `127.0.0.1`). */
  readonly host: string
  /** Required when `host` is not loopback. */
  readonly token: string | undefined
  /** No mutation is offered or accepted. */
  readonly readOnly: boolean
}

/**
 * Loopback addresses and names: the only ones that need no token.
 *
 * @since 0.1.0
 * @category safety
 */
export const isLoopback = (host: string): boolean => {
  const h = host
    .replace(/^\[|\]$/g, "")
    .toLowerCase()
    .replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "")
  if (h === "localhost" || h === "::1") return true
  return isIP(h) === 4 && h.startsWith("127.")
}

/** Headers a reverse proxy adds: a request carrying one was relayed, whatever its socket says. */
const forwardingHeaders = ["forwarded", "x-forwarded-for", "x-real-ip", "x-forwarded-host"]

/**
 * Why a connection may not use a dashboard without a token, or `undefined` when it may: only a
 * loopback peer (the socket's remote address, never the `Host` header) that no proxy relayed.
 * With a token the token decides (see {@link mayRead}).
 *
 * @since 0.1.0
 * @category safety
 */
export const refuseConnection = (
  settings: Settings,
  peer: string | undefined,
  headers: Readonly<Record<string, string | undefined>>
): string | undefined => {
  if (settings.token !== undefined) return undefined
  if (peer === undefined || !isLoopback(peer)) {
    return `this dashboard has no token, so it answers only connections from this machine (this one is from ${peer ?? "an unknown address"}): give it a token (OUTBOX_DASHBOARD_TOKEN, --token or the token option, 16+ characters)`
  }
  const relayed = forwardingHeaders.find((name) => headers[name] !== undefined)
  if (relayed !== undefined) {
    return `this dashboard has no token, so it answers only connections from this machine, and this request was relayed by a proxy (${relayed}): give it a token`
  }
  return undefined
}

/**
 * Refuses a non-loopback address without a token, and a token too short to resist guessing.
 *
 * @since 0.1.0
 * @category safety
 */
export const validate = (settings: Settings): DashboardConfigError | undefined => {
  if (settings.token !== undefined && settings.token.length < 16) {
    return new DashboardConfigError({ reason: "the dashboard token must be at least 16 characters" })
  }
  if (!isLoopback(settings.host) && settings.token === undefined) {
    return new DashboardConfigError({
      reason: `the dashboard listens on ${settings.host}, beyond loopback: set a token (--token or OUTBOX_DASHBOARD_TOKEN, 16+ characters), or listen on 127.0.0.1`
    })
  }
  return undefined
}

/**
 * A fresh per-process CSRF token.
 *
 * @since 0.1.0
 * @category safety
 */
export const makeCsrfToken = (): string => randomBytes(24).toString("base64url")

/**
 * Constant-time equality of two secrets.
 *
 * @since 0.1.0
 * @category safety
 */
export const sameSecret = (given: string | undefined, expected: string): boolean => {
  if (given === undefined) return false
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * The name of the cookie holding the access token.
 *
 * @since 0.1.0
 * @category safety
 */
export const tokenCookie = "effect_outbox_dashboard"

const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (header === undefined) return undefined
  for (const part of header.split(";")) {
    const [k, ...v] = part.trim().split("=")
    if (k === name) return decodeURIComponent(v.join("="))
  }
  return undefined
}

/**
 * Whether a request may read: always without a token; with one, it carries it.
 *
 * @since 0.1.0
 * @category safety
 */
export const mayRead = (token: string | undefined, headers: Readonly<Record<string, string | undefined>>): boolean => {
  if (token === undefined) return true
  const bearer = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? "")?.[1]
  return sameSecret(bearer, token) || sameSecret(cookieValue(headers.cookie, tokenCookie), token)
}

/**
 * Whether the `Host` header names this dashboard: loopback names, or the configured host.
 * Refusing others stops a DNS-rebinding page from reading a loopback dashboard. It is no access
 * control (a client sets any `Host`); with a token on a loopback or wildcard address, a rebinding
 * page has no token, so any name may reach it (a service's own name, behind its load balancer).
 *
 * @since 0.1.0
 * @category safety
 */
export const hostAllowed = (settings: Settings, hostHeader: string | undefined): boolean => {
  if (hostHeader === undefined) return false
  const bare = (h: string) => h.replace(/^\[|\]$/g, "").toLowerCase()
  const hostname = bare(hostHeader.replace(/:\d+$/, ""))
  if (isLoopback(hostname)) return true
  const wildcard = settings.host === "0.0.0.0" || settings.host === "::"
  if (settings.token !== undefined && (wildcard || isLoopback(settings.host))) return true
  if (isLoopback(settings.host)) return false
  if (wildcard) return true
  return hostname === bare(settings.host)
}

/**
 * Why a mutation is refused, or `undefined` when it may go on: read-only mode, a foreign
 * `Origin`, a cross-site fetch, or a missing or wrong CSRF token.
 *
 * @since 0.1.0
 * @category safety
 */
export const refuseMutation = (
  settings: Settings,
  csrfToken: string,
  request: { readonly headers: Readonly<Record<string, string | undefined>>; readonly csrf: string | undefined }
): string | undefined => {
  if (settings.readOnly) return "the dashboard is read-only"
  const origin = request.headers.origin
  const host = request.headers.host
  if (origin !== undefined && origin !== "null") {
    let originHost: string
    try {
      originHost = new URL(origin).host
    } catch {
      return "a malformed Origin"
    }
    if (originHost !== host) return `a cross-site request (Origin ${origin})`
  } else {
    const site = request.headers["sec-fetch-site"]
    if (site !== undefined && site !== "same-origin" && site !== "none") return "a cross-site request"
    if (origin === "null") return "a request from an opaque origin"
  }
  if (!sameSecret(request.csrf, csrfToken)) return "a missing or stale form token: reload the page"
  return undefined
}
