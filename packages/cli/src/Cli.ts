/**
 * The `effect-outbox` command tree (Effect's CLI module). Connection flags are shared by every
 * command and fall back to the environment: `--database-url` / `DATABASE_URL`, `--schema` /
 * `OUTBOX_SCHEMA`, `--table-prefix` / `OUTBOX_TABLE_PREFIX`, `--brokers` / `KAFKA_BROKERS`.
 * `--broker-timeout` / `OUTBOX_BROKER_STARTUP_TIMEOUT` bounds how long a broker command waits for the
 * brokers. Mutating commands are dry runs unless `--execute` is given.
 *
 * @since 0.1.0
 */

import { Command } from "effect/cli"
import { lifecycle } from "./commands/Lifecycle.ts"
import { log } from "./commands/Log.ts"
import { dlt, parked, purge } from "./commands/Maintenance.ts"
import { root } from "./commands/Root.ts"
import { inspect, recoverStale, release, requeue, skip, status } from "./commands/Rows.ts"
import { dashboard } from "./commands/Serve.ts"
import { topics } from "./commands/Topics.ts"

export { lifecycle } from "./commands/Lifecycle.ts"
export { log } from "./commands/Log.ts"
export { dlt, parked, purge } from "./commands/Maintenance.ts"
export { parseDuration, root } from "./commands/Root.ts"
export { inspect, recoverStale, release, requeue, skip, status } from "./commands/Rows.ts"
export { dashboard } from "./commands/Serve.ts"
export { topics } from "./commands/Topics.ts"

/**
 * The whole tree.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = root.pipe(
  Command.withSubcommands([
    status,
    inspect,
    requeue,
    skip,
    release,
    recoverStale,
    dlt,
    parked,
    lifecycle,
    log,
    purge,
    topics,
    dashboard
  ])
)

/**
 * Runs the CLI on `args` (without the `node` and script entries).
 *
 * @since 0.1.0
 * @category running
 */
export const run = Command.runWith(command, { version: "0.1.0" })
