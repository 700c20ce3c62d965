/**
 * `lifecycle list|release`: the consumer group registered as each topic's lifecycle driver, and
 * handing the role over.
 *
 * @since 0.1.0
 */
import type { Registration } from "@effect-outbox/core/LifecycleRegistry"
import { Command, Flag } from "effect/cli"
import * as Option from "effect/Option"
import * as Operations from "../Operations.ts"
import { selectionFlags, withDatabase } from "./Root.ts"

const renderList = (rows: ReadonlyArray<Registration>): string =>
  rows.length === 0
    ? "no lifecycle groups registered"
    : rows
        .map(
          (r) =>
            `${r.topic}  ${r.group}  registered ${new Date(r.registeredAt).toISOString()}  last start ${new Date(r.startedAt).toISOString()}`
        )
        .join("\n")

const renderRelease = (report: Operations.LifecycleReleaseReport): string => {
  const what = `group ${report.registration.group} as the lifecycle group of ${report.registration.topic}`
  return report.dryRun
    ? `dry run: would release ${what} (add --execute); stop its services or set lifecycle: false first`
    : report.released
      ? `released ${what}; the next driving group to start on the topic takes it`
      : `${what} was already released`
}

const list = Command.make(
  "list",
  {
    topic: Flag.String("topic").pipe(Flag.withDescription("only this topic"), Flag.optional),
    group: Flag.String("group").pipe(Flag.withDescription("only this consumer group"), Flag.optional)
  },
  (input) =>
    withDatabase(
      Operations.lifecycleList({
        topic: Option.getOrUndefined(input.topic),
        group: Option.getOrUndefined(input.group)
      }),
      renderList
    )
).pipe(Command.withDescription("the consumer group that drives the outbox lifecycle of each topic"))

const release = Command.make(
  "release",
  {
    topic: Flag.String("topic").pipe(Flag.withDescription("the topic")),
    group: Flag.String("group").pipe(Flag.withDescription("the group registered on it")),
    operator: selectionFlags.operator,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit log (required)"), Flag.withDefault("")),
    execute: selectionFlags.execute
  },
  (input) => withDatabase(Operations.lifecycleRelease(input), renderRelease)
).pipe(
  Command.withDescription(
    "hand a topic's lifecycle role over: remove the group's registration (audited; dry run unless --execute)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const lifecycle = Command.make("lifecycle").pipe(
  Command.withDescription("the consumer group driving each topic's outbox lifecycle: list, release"),
  Command.withSubcommands([list, release])
)
