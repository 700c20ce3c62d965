/**
 * `dlt discard` and `dlt history`: marking dead letters handled without a replay, and what was
 * done with a dead-letter topic's letters, through the same operations as the dashboard (the
 * audit topic `<topic>.DLT.audit`).
 *
 * @since 0.1.0
 */
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Operations from "../Operations.ts"
import * as Render from "../Render.ts"
import { selectionFlags, userError, withBroker } from "./Root.ts"

const deadLetterTopic = Argument.String("dead-letter-topic").pipe(Argument.withDescription("e.g. orders.DLT"))

/**
 * @since 0.1.0
 * @category commands
 */
export const dltDiscard = Command.make(
  "discard",
  {
    topic: deadLetterTopic,
    letters: Flag.String("letter").pipe(
      Flag.withDescription(
        "the letter's place on the dead-letter topic, partition/offset as dlt list shows (repeatable)"
      ),
      Flag.between(0, 10_000)
    ),
    operator: selectionFlags.operator,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit (required)"), Flag.withDefault("")),
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      if (input.letters.length === 0) {
        return yield* userError(
          new Operations.OperatorError({ reason: "name the dead letters: --letter partition/offset (repeatable)" })
        )
      }
      if (input.reason.trim() === "") {
        return yield* userError(new Operations.OperatorError({ reason: "--reason is required: a discard is audited" }))
      }
      const places = yield* Effect.forEach(input.letters, Operations.parsePlace).pipe(Effect.mapError(userError))
      const discard = Operations.discardDeadLetters({
        from: input.topic,
        places,
        operator: input.operator,
        reason: input.reason,
        execute: input.execute,
        // Every named letter must be there: a typo discards nothing rather than part of the list.
        strict: true
      }).pipe(
        Effect.tap((report) =>
          report.dryRun
            ? Effect.void
            : Effect.logWarning(
                `AUDIT outbox dlt discard by ${input.operator}: ${report.selected.length} dead letter(s) from ${input.topic} (${input.reason})`
              ).pipe(
                Effect.annotateLogs({
                  audit: "outbox.dlt.discard",
                  operator: input.operator,
                  reason: input.reason,
                  topic: input.topic
                })
              )
        )
      )
      yield* withBroker(discard, (report) => Render.discard(input.topic, report))
    })
).pipe(
  Command.withDescription(
    "mark dead letters handled without republishing them, audited on <topic>.audit (dry run unless --execute)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const dltHistory = Command.make(
  "history",
  {
    topic: deadLetterTopic,
    limit: Flag.Int("limit").pipe(Flag.withDescription("the latest this many"), Flag.withDefault(50))
  },
  (input) =>
    Effect.gen(function* () {
      if (input.limit < 1) {
        return yield* userError(new Operations.OperatorError({ reason: `--limit ${input.limit}: at least 1` }))
      }
      yield* withBroker(Operations.deadLetterHistory(input.topic, { limit: input.limit }), (handlings) =>
        Render.deadLetterHistory(input.topic, handlings)
      )
    })
).pipe(
  Command.withDescription(
    "the replays and discards recorded on a dead-letter topic's audit topic (<topic>.audit), newest first"
  )
)
