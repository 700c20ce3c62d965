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
 * @since 0.1.0
 */

import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import * as Guard from "./DashboardGuard.ts"
import * as Html from "./DashboardHtml.ts"
import * as DeadLetters from "./internal/dashboard/deadLetters.ts"
import * as Log from "./internal/dashboard/log.ts"
import * as Overview from "./internal/dashboard/overview.ts"
import * as Repairs from "./internal/dashboard/repairs.ts"
import * as Shared from "./internal/dashboard/shared.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The address the stand-alone server listens on (default `127.0.0.1`); beyond loopback a token is required. */
  readonly host?: string | undefined
  /**
   * Access token (16+ characters). Without one, only connections whose socket peer is loopback
   * (and that no proxy relayed) are served; with one, every request carries it.
   */
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
  /**
   * How old the oldest pending event may grow before the overview turns orange, or red with
   * "no relay is running" when no relay heartbeat is alive (default 1 minute).
   */
  readonly pendingAlertAfter?: Duration.Input | undefined
  /** The log relay's slot the `/log` page shows (default `effect_outbox_log`). */
  readonly logSlot?: string | undefined
}

/**
 * The dashboard's routes as a `Layer` on an `HttpRouter`: mount it in a service's own server
 * with `HttpRouter.serve`. Safe on a server listening on every interface: without a `token`,
 * requests from other machines are refused (judged from the connection, not the `Host` header).
 * Fails with `DashboardConfigError` for an unsafe setting.
 *
 * @since 0.1.0
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
      const ctx = yield* Shared.makeContext(settings, base)
      const overview = yield* Overview.make(ctx, {
        groups: options.groups ?? [],
        refresh: Duration.fromInputUnsafe(options.refresh ?? "5 seconds"),
        windowMillis: Duration.toMillis(Duration.fromInputUnsafe(options.window ?? "10 minutes")),
        brokerTimeout: Duration.fromInputUnsafe(options.brokerTimeout ?? "5 seconds"),
        lateAfterMillis: Duration.toMillis(Duration.fromInputUnsafe(options.pendingAlertAfter ?? "1 minute"))
      })
      const assets = [
        HttpRouter.route(
          "GET",
          "/assets/dashboard.css",
          HttpServerResponse.text(Html.css, { contentType: "text/css; charset=utf-8", headers: Shared.securityHeaders })
        ),
        HttpRouter.route(
          "GET",
          "/assets/dashboard.js",
          HttpServerResponse.text(Html.js, {
            contentType: "text/javascript; charset=utf-8",
            headers: Shared.securityHeaders
          })
        )
      ]
      const list = [
        ...overview.routes,
        ...DeadLetters.routes(ctx),
        ...Repairs.routes(ctx),
        ...Log.routes(ctx, options.logSlot ?? PgLogSource.defaultSlot),
        ...assets
      ]
      return Layer.merge(HttpRouter.addAll(list, base === "" ? {} : { prefix: base }), overview.sampler)
    })
  )

/**
 * A stand-alone dashboard server on `host:port` (default `127.0.0.1`, port 0 picks a free one),
 * logging its address; needs the outbox's services (database and broker).
 *
 * @since 0.1.0
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
 * @since 0.1.0
 * @category layers
 */
export const url = (prefix = ""): Effect.Effect<string, never, HttpServer.HttpServer> =>
  Effect.map(HttpServer.HttpServer, (server) => `${HttpServer.formatAddress(server.address)}${prefix}`)
