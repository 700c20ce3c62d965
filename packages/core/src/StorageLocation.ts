/**
 * Where the outbox is stored, as a person reads it (e.g. `schema "outbox" in database app at
 * db.internal:5432`), for the runtime's start line: a typo in a schema or host name is visible in
 * the first log line, not after a day of events in the wrong place. Set by the storage adapter;
 * absent, the start line names no location.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"

/**
 * @since 0.1.0
 * @category references
 */
export const StorageLocation = Context.Reference<string | undefined>("@effect-outbox/core/StorageLocation", {
  defaultValue: () => undefined
})
