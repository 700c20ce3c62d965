/**
 * The commands over outbox rows: `status`, `inspect`, `requeue`, `skip`, `release`,
 * `recover-stale`.
 *
 * @since 0.1.0
 */
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Operations from "../Operations.ts"
import * as Render from "../Render.ts"
import {
  parseDuration,
  reachableBroker,
  root,
  selection,
  selectionFlags,
  userError,
  withDatabase,
  withDatabaseAndBroker
} from "./Root.ts"

// -- commands --------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category commands
 */
export const status = Command.make(
  "status",
  {
    topic: Flag.String("topic").pipe(Flag.withDescription("only this topic"), Flag.optional),
    failures: Flag.Int("failures").pipe(Flag.withDescription("recent failures to list"), Flag.withDefault(10)),
    stuckAfter: Flag.String("stuck-after").pipe(
      Flag.withDescription("list UNDER_PROCESSING rows not updated for this long (default 15m)"),
      Flag.withDefault("15m")
    ),
    groups: Flag.String("group").pipe(
      Flag.withDescription("a consumer group whose lag on the outbox's topics to show (repeatable; needs --brokers)"),
      Flag.between(0, 100)
    ),
    deadLetters: Flag.Boolean("dead-letters").pipe(
      Flag.withDescription("dead letters on each topic's <topic>.DLT, and how many are not replayed (needs --brokers)"),
      Flag.withDefault(false)
    )
  },
  (input) => {
    const stuckAfterMillis = parseDuration(input.stuckAfter)
    if (Option.isNone(stuckAfterMillis)) {
      return Effect.fail(
        userError(
          new Operations.OperatorError({
            reason: `--stuck-after "${input.stuckAfter}" is not a duration (try 15m, 1h)`
          })
        )
      )
    }
    const report = Operations.status({
      topic: Option.getOrUndefined(input.topic),
      failures: input.failures,
      stuckAfterMillis: stuckAfterMillis.value
    })
    return input.groups.length === 0 && !input.deadLetters
      ? withDatabase(report, Render.status)
      : withDatabase(
          Effect.gen(function* () {
            const status = yield* report
            const topics = status.topics.map((t) => t.topic)
            // The database's counts are printed whatever the broker does; a broker that does not
            // answer is one line of the report.
            const fromBroker = yield* Effect.gen(function* () {
              const consumerLag =
                input.groups.length === 0 ? undefined : yield* Operations.consumerLag({ groups: input.groups, topics })
              const deadLetters = input.deadLetters ? yield* Operations.deadLetterDepth(topics) : undefined
              return {
                ...(consumerLag === undefined ? {} : { consumerLag }),
                ...(deadLetters === undefined ? {} : { deadLetters })
              }
            }).pipe(
              Effect.provide(reachableBroker(yield* root)),
              Effect.catch((error: { readonly message: string }) => Effect.succeed({ brokerError: error.message }))
            )
            return { ...status, ...fromBroker } satisfies Operations.Status
          }),
          Render.status
        )
  }
).pipe(
  Command.withDescription(
    "counts by status and topic, oldest pending age, stale leases, stuck rows, failures; with --group, consumer lag; with --dead-letters, dead letters not yet replayed"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const inspect = Command.make(
  "inspect",
  {
    id: Argument.String("event-id").pipe(Argument.withDescription("the event id"))
  },
  (input) => withDatabase(Operations.inspect(input.id), Render.inspection)
).pipe(Command.withDescription("one event: row, receipt, transition history, consumers that processed it"))

/**
 * @since 0.1.0
 * @category commands
 */
export const requeue = Command.make(
  "requeue",
  {
    ...selectionFlags,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit log (required)"), Flag.withDefault(""))
  },
  (input) =>
    withDatabase(
      Operations.requeue({
        ...selection(input),
        operator: input.operator,
        reason: input.reason,
        execute: input.execute
      }),
      Render.change
    )
).pipe(Command.withDescription("FAILURE -> PENDING for the selected rows (audited; dry run unless --execute)"))

/**
 * @since 0.1.0
 * @category commands
 */
export const skip = Command.make(
  "skip",
  {
    ...selectionFlags,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit log (required)"), Flag.withDefault(""))
  },
  (input) =>
    withDatabase(
      Operations.skip({
        ...selection(input),
        operator: input.operator,
        reason: input.reason,
        execute: input.execute
      }),
      Render.change
    )
).pipe(
  Command.withDescription(
    "FAILURE -> SKIPPED for the selected rows: give up on them so their keys go on (audited; dry run unless --execute)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const release = Command.make("release", selectionFlags, (input) =>
  withDatabase(
    Operations.release({ ...selection(input), operator: input.operator, execute: input.execute }),
    Render.change
  )
).pipe(Command.withDescription("PREQUEUED -> PENDING for the selected rows (dry run unless --execute)"))

/**
 * @since 0.1.0
 * @category commands
 */
export const recoverStale = Command.make(
  "recover-stale",
  {
    limit: Flag.Int("limit").pipe(Flag.withDescription("stale rows per round"), Flag.withDefault(100)),
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      if (!input.execute) return yield* withDatabase(Operations.listStale({ limit: input.limit }), Render.stale)
      return yield* withDatabaseAndBroker(Operations.recoverStale({ limit: input.limit }), Render.stale)
    })
).pipe(Command.withDescription("expired DISPATCHING leases: probe the broker, then mark published or requeue"))
