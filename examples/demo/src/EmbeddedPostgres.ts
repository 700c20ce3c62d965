/**
 * A real PostgreSQL engine in this process: PGlite (PostgreSQL compiled to WebAssembly) behind
 * `@electric-sql/pglite-socket`, so `@effect/sql-pg` talks to it over the wire protocol exactly
 * as it talks to a server, and the PostgreSQL adapter runs unchanged.
 *
 * PGlite is single-connection: two transactions interleaved over the socket fail (`portal ""
 * does not exist`). The client therefore gets ONE pooled connection — every transaction waits
 * its turn — and no LISTEN connection (relays poll instead).
 *
 * Creating a fresh cluster runs `initdb` in WebAssembly (10+ s); the freshly initialised data
 * directory is cached as a tarball under `~/.cache/effect-outbox/` and reused (about 1 s).
 *
 * @since 0.1.0
 */

import { mkdir, readFile, rename, writeFile } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

/**
 * What the embedded engine reports about itself.
 *
 * @since 0.1.0
 * @category models
 */
export interface Info {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: the socket server's address. */
  readonly url: string
  /** Whether the cached template data directory was used (fast start). */
  readonly fromTemplate: boolean
  /** Milliseconds spent starting the engine. */
  readonly startMillis: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class EmbeddedPostgres extends Context.Service<EmbeddedPostgres, Info>()(
  "@effect-outbox/example-demo/EmbeddedPostgres"
) {}

const PGLITE_VERSION = "0.5.14"

const templatePath = () =>
  join(
    process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"),
    "effect-outbox",
    `pglite-${PGLITE_VERSION}-template.tar.gz`
  )

// A cache that cannot be read or written only costs start-up time, never correctness.
const loadTemplate = async (): Promise<Blob | undefined> => {
  try {
    return new Blob([await readFile(templatePath())])
  } catch {
    return undefined
  }
}

const saveTemplate = async (db: PGlite): Promise<void> => {
  try {
    const dump = await db.dumpDataDir("gzip")
    const path = templatePath()
    await mkdir(join(path, ".."), { recursive: true })
    const tmp = `${path}.${process.pid}.tmp`
    await writeFile(tmp, new Uint8Array(await dump.arrayBuffer()))
    await rename(tmp, path)
  } catch {
    // best effort
  }
}

const openDatabase = async (): Promise<{ readonly db: PGlite; readonly fromTemplate: boolean }> => {
  const template = await loadTemplate()
  if (template !== undefined) {
    try {
      return { db: await PGlite.create({ loadDataDir: template }), fromTemplate: true }
    } catch {
      // a corrupt or incompatible template: fall through to a fresh initdb
    }
  }
  const db = await PGlite.create()
  // Dump before anything is written, so the template is a pristine cluster.
  await saveTemplate(db)
  return { db, fromTemplate: false }
}

/**
 * Starts PGlite and its socket server in the current scope (both stopped when it closes) and
 * returns the connection URL.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start: Effect.Effect<Info, never, Scope.Scope> = Effect.gen(function* () {
  const started = Date.now()
  const { db, fromTemplate } = yield* Effect.acquireRelease(Effect.promise(openDatabase), ({ db }) =>
    Effect.promise(() => db.close()).pipe(Effect.ignore)
  )
  const server = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const server = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1" })
      await server.start()
      return server
    }),
    (server) => Effect.promise(() => server.stop()).pipe(Effect.ignore)
  )
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    fromTemplate,
    startMillis: Date.now() - started
  }
})

/**
 * The embedded engine and an `@effect/sql-pg` client with one pooled connection to it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<EmbeddedPostgres | PgClient.PgClient | SqlClient.SqlClient, SqlError> = Layer.unwrap(
  Effect.map(start, (info) =>
    Layer.merge(
      Layer.succeed(EmbeddedPostgres)(info),
      PgClient.layer({
        url: Redacted.make(info.url),
        // One connection: PGlite runs one transaction at a time (see the module comment).
        maxConnections: 1,
        minConnections: 1
      })
    )
  )
)
