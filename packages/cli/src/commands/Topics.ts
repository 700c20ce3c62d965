/**
 * The `topics` commands: `ensure` creates topics with their dead-letter topics, `list` shows the
 * topics the outbox's rows use and what the broker has of them.
 *
 * @since 0.1.0
 */
import { Argument, Command, Flag } from "effect/cli"
import * as Operations from "../Operations.ts"
import * as Render from "../Render.ts"
import { selectionFlags, withBroker, withDatabaseAndBroker } from "./Root.ts"

const ensure = Command.make(
  "ensure",
  {
    topics: Argument.String("topic").pipe(
      Argument.withDescription("a topic a service reads or writes (repeatable); its <topic>.DLT is created with it"),
      Argument.variadic({ min: 1 })
    ),
    partitions: Flag.Int("partitions").pipe(
      Flag.withDescription("partitions of each topic created (default 1); existing topics are left as they are"),
      Flag.withDefault(1)
    ),
    replicationFactor: Flag.Int("replication-factor").pipe(
      Flag.withDescription("replicas of each topic created (default 1: a single broker; 3 on a production cluster)"),
      Flag.withDefault(1)
    ),
    noDeadLetter: Flag.Boolean("no-dead-letter").pipe(
      Flag.withDescription("do not create the <topic>.DLT dead-letter topics"),
      Flag.withDefault(false)
    ),
    execute: selectionFlags.execute
  },
  (input) =>
    withBroker(
      Operations.ensureTopics({
        topics: input.topics,
        partitions: input.partitions,
        deadLetters: !input.noDeadLetter,
        execute: input.execute
      }),
      Render.ensuredTopics,
      { replicationFactor: input.replicationFactor }
    )
).pipe(
  Command.withDescription(
    "create each topic and its <topic>.DLT dead-letter topic when missing (dry run unless --execute)"
  )
)

const list = Command.make("list", {}, () => withDatabaseAndBroker(Operations.outboxTopics, Render.outboxTopics)).pipe(
  Command.withDescription(
    "the topics the outbox's rows use, with their partitions and dead-letter topics on the broker"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const topics = Command.make("topics").pipe(
  Command.withDescription("Kafka topics: ensure (create with dead-letter topics), list"),
  Command.withSubcommands([ensure, list])
)
