/**
 * The runtime's health server: `/healthz` and `/readyz` on a port of their own (plain `node:http`,
 * so core needs no HTTP platform package), for the life of the scope.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"
import * as Health from "../../Health.ts"

export interface HealthServer {
  readonly port: number
}

const listen = (server: Server, port: number, host: string) =>
  Effect.callback<number, Error>((resume) => {
    server.once("error", (error) => resume(Effect.fail(error)))
    server.listen(port, host, () => resume(Effect.succeed((server.address() as AddressInfo).port)))
  })

const close = (server: Server) =>
  Effect.callback<void>((resume) => {
    server.close(() => resume(Effect.void))
    server.closeAllConnections()
  })

/** Serves `health` on `host:port` until the scope closes; logs the address. */
export const serve = (health: Health.Health["Service"], options: { readonly port: number; readonly host: string }) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const run = Effect.runPromiseWith(context)
    const server = createServer((request, response) => {
      const path = (request.url ?? "/").split("?")[0]
      // Both spellings orchestrators use: Kubernetes' `/healthz` `/readyz`, and `/health/live` `/health/ready`.
      const probe =
        path === "/healthz" || path === "/health/live"
          ? health.live
          : path === "/readyz" || path === "/health/ready"
            ? health.ready
            : undefined
      if (probe === undefined || (request.method !== "GET" && request.method !== "HEAD")) {
        response
          .writeHead(404, { "content-type": "text/plain; charset=utf-8" })
          .end("not found: /healthz, /readyz, /health/live or /health/ready")
        return
      }
      void run(probe).then(
        (report) => {
          const { status, body } = Health.render(report)
          response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(body)
        },
        (error: unknown) => response.writeHead(500).end(String(error))
      )
    })
    const port = yield* Effect.acquireRelease(
      listen(server, options.port, options.host).pipe(
        Effect.mapError(
          (error) => new Health.HealthServerError({ host: options.host, port: options.port, reason: error.message })
        )
      ),
      () => close(server)
    )
    yield* Effect.logInfo(`outbox health: http://${options.host}:${port}/healthz and /readyz`)
    return { port } satisfies HealthServer
  })
