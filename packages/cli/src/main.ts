#!/usr/bin/env node
/**
 * `effect-outbox`: the operator CLI. Results go to standard output; log lines (the audit lines
 * of requeue and release among them) go to standard error, so `--json` output stays parseable.
 * `OUTBOX_LOG_LEVEL` (default `Warn`) sets how much is logged.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as References from "effect/References"
import * as Cli from "./Cli.ts"
import { variables } from "./internal/variables.ts"

const stderrLogger = Logger.map(Logger.formatSimple, (line) => void process.stderr.write(`${line}\n`))

const program = Effect.gen(function* () {
  const level = yield* variables.logLevel.config
  yield* Cli.run(process.argv.slice(2)).pipe(Effect.provideService(References.MinimumLogLevel, level))
}).pipe(Effect.provideService(Logger.CurrentLoggers, new Set([stderrLogger])), Effect.provide(NodeServices.layer))

NodeRuntime.runMain(program, {
  // Exit when done (broker and database clients must not keep the process alive); a usage error
  // or a failed command exits 1.
  teardown: (exit, onExit) => {
    const code = exit._tag === "Success" ? 0 : 1
    onExit(code)
    process.exit(code)
  }
})
