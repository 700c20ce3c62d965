/**
 * Where the outbox lives, as the runtime's start line says it: schema, database and host, never
 * the user or password of the connection string.
 */
import type { PgClientConfig } from "@effect/sql-pg/PgClient"
import * as Redacted from "effect/Redacted"

/** `database app at db.internal:5432`, from the URL or the separate fields. */
export const describeDatabase = (config: PgClientConfig): string => {
  let host = config.host ?? config.path ?? "localhost"
  let port = config.port === undefined ? undefined : String(config.port)
  let database = config.database
  if (config.url !== undefined) {
    try {
      const url = new URL(Redacted.value(config.url))
      host = url.hostname === "" ? (url.searchParams.get("host") ?? host) : url.hostname
      port = url.port === "" ? port : url.port
      database = url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : database
    } catch {
      // not a URL the WHATWG parser reads: keep the separate fields
    }
  }
  return `database ${database ?? "(default)"} at ${host}${port === undefined ? "" : `:${port}`}`
}

/** `schema "outbox" in database app at db.internal:5432`. */
export const describe = (schema: string, config: PgClientConfig): string =>
  `schema "${schema}" in ${describeDatabase(config)}`
