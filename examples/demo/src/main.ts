/**
 * `pnpm demo`: the reference flow end to end, with a live progress display and a summary.
 *
 * With nothing configured it runs on an embedded PostgreSQL (PGlite, in this process) and the
 * in-memory broker, and says so; `DATABASE_URL` / `KAFKA_BROKERS` switch to real services.
 * `DEMO_ORDERS` (default 200) bounds the run. `--engine log` (or `OUTBOX_ENGINE=log`) runs the log
 * engine, on `LOGICAL_DATABASE_URL` (else `DATABASE_URL`): a server with `wal_level = logical`.
 * Exits 0 when every guarantee held, 1 otherwise, 2 when it could not run.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import * as Program from "./Program.ts"

NodeRuntime.runMain(Program.program, {
  disableErrorReporting: true,
  // Exit explicitly, also on success: broker and database clients must not keep the process alive.
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit)) {
      const code = exit.value as number
      onExit(code)
      process.exit(code)
    }
    if (!Cause.hasInterruptsOnly(exit.cause)) console.error(`demo failed: ${Cause.pretty(exit.cause)}`)
    onExit(Cause.hasInterruptsOnly(exit.cause) ? 130 : 2)
    process.exit(Cause.hasInterruptsOnly(exit.cause) ? 130 : 2)
  }
})
