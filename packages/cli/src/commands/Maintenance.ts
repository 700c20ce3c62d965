/**
 * The maintenance commands: `dlt` (dead letters), `parked` (durably parked keys), `purge`.
 *
 * @since 0.1.0
 */
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Operations from "../Operations.ts"
import * as Render from "../Render.ts"
import { dltDiscard, dltHistory } from "./DeadLetterAudit.ts"
import { parseDuration, selectionFlags, userError, withBroker, withDatabase } from "./Root.ts"

const dltList = Command.make(
  "list",
  {
    topic: Argument.String("dead-letter-topic").pipe(Argument.withDescription("e.g. orders.DLT")),
    limit: Flag.Int("limit").pipe(Flag.withDescription("at most this many"), Flag.withDefault(1000))
  },
  (input) => withBroker(Operations.deadLetters(input.topic, { limit: input.limit }), Render.deadLetters)
).pipe(Command.withDescription("the dead letters of a dead-letter topic, with their errors"))

const dltReplay = Command.make(
  "replay",
  {
    topic: Argument.String("dead-letter-topic").pipe(Argument.withDescription("e.g. orders.DLT")),
    eventIds: Flag.String("event-id").pipe(
      Flag.withDescription("replay this event (repeatable)"),
      Flag.between(0, 10_000)
    ),
    all: Flag.Boolean("all").pipe(Flag.withDescription("replay every dead letter"), Flag.withDefault(false)),
    to: Flag.String("to").pipe(Flag.withDescription("republish here instead of the original topic"), Flag.optional),
    operator: selectionFlags.operator,
    reason: Flag.String("reason").pipe(
      Flag.withDescription("why, for the audit topic's history"),
      Flag.withDefault("replayed from the CLI")
    ),
    execute: selectionFlags.execute
  },
  (input) =>
    withBroker(
      Operations.replayAudited({
        from: input.topic,
        eventIds: input.eventIds,
        all: input.all,
        to: Option.getOrUndefined(input.to),
        execute: input.execute,
        operator: input.operator,
        reason: input.reason
      }),
      Render.replay
    )
).pipe(Command.withDescription("republish selected dead letters to their original topic (dry run unless --execute)"))

/**
 * @since 0.1.0
 * @category commands
 */
export const dlt = Command.make("dlt").pipe(
  Command.withDescription("dead letters: list, replay, discard, history"),
  Command.withSubcommands([dltList, dltReplay, dltDiscard, dltHistory])
)

const parkedList = Command.make(
  "list",
  { group: Flag.String("group").pipe(Flag.withDescription("only this consumer group"), Flag.optional) },
  (input) => withDatabase(Operations.parkedList({ group: Option.getOrUndefined(input.group) }), Render.parked)
).pipe(Command.withDescription("parked keys (durable parking): group, partition, key, parked offsets head first"))

const parkedRelease = Command.make(
  "release",
  {
    group: Flag.String("group").pipe(Flag.withDescription("the consumer group")),
    topic: Flag.String("topic").pipe(Flag.withDescription("the key's topic")),
    partition: Flag.Int("partition").pipe(Flag.withDescription("the key's partition")),
    key: Flag.String("key").pipe(Flag.withDescription("the parked key")),
    execute: selectionFlags.execute
  },
  (input) =>
    withDatabase(
      Operations.parkedRelease({
        consumer: input.group,
        topic: input.topic,
        partition: input.partition,
        key: input.key,
        execute: input.execute
      }),
      Render.parkedRelease
    )
).pipe(
  Command.withDescription(
    "ask the consumer that owns the partition to run a parked key's records, head first (dry run unless --execute)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const parked = Command.make("parked").pipe(
  Command.withDescription("durably parked keys: list, release"),
  Command.withSubcommands([parkedList, parkedRelease])
)

/**
 * @since 0.1.0
 * @category commands
 */
export const purge = Command.make(
  "purge",
  {
    olderThan: Flag.String("older-than").pipe(Flag.withDescription('age of the last update, e.g. 7d, 12h, "30 days"')),
    statuses: Flag.String("status").pipe(
      Flag.withDescription("finished statuses to purge, comma separated (default SUCCESS,PUSHED_FAILURE,PUBLISHED)"),
      Flag.withDefault("SUCCESS,PUSHED_FAILURE,PUBLISHED")
    ),
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      const olderThan = parseDuration(input.olderThan)
      if (Option.isNone(olderThan)) {
        return yield* userError(
          new Operations.OperatorError({
            reason: `--older-than "${input.olderThan}" is not a duration (try 7d, 12h, "30 days")`
          })
        )
      }
      const statuses = input.statuses
        .split(",")
        .map((s) => s.trim().toUpperCase())
        .filter((s) => s !== "")
      const unknown = statuses.filter((s) => !(Lifecycle.statuses as ReadonlyArray<string>).includes(s))
      if (unknown.length > 0) {
        return yield* userError(new Operations.OperatorError({ reason: `unknown status ${unknown.join(", ")}` }))
      }
      yield* withDatabase(
        Operations.purge({
          olderThanMillis: olderThan.value,
          statuses: statuses as Array<Lifecycle.OutboxStatus>,
          execute: input.execute
        }),
        Render.purge
      )
    })
).pipe(
  Command.withDescription("delete finished rows older than a duration, in bounded batches (dry run unless --execute)")
)
