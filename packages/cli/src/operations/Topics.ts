/**
 * `topics`: create the topics a service needs with their dead-letter topics, and list the topics
 * the outbox's rows use with what the broker has of them.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import type { BrokerAdminError, StoreError } from "@effect-outbox/core/Errors"
import { ReadModel } from "@effect-outbox/core/ReadModel"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { OperatorError } from "./OperatorError.ts"

/**
 * One topic `topics ensure` looked at.
 *
 * @since 0.1.0
 * @category models
 */
export interface EnsuredTopic {
  readonly topic: string
  /** The topic whose dead letters it holds, for a dead-letter topic. */
  readonly deadLetterOf: string | null
  /** `exists`: left as it is (whatever its partition count); `created` / `would create`. */
  readonly action: "exists" | "created" | "would create"
  readonly partitions: number
}

/**
 * The names to ensure: each topic, then its `<topic>.DLT` (a name that is itself a dead-letter
 * topic gets none), each once.
 *
 * @since 0.1.0
 * @category topics
 */
export const withDeadLetterTopics = (
  topics: ReadonlyArray<string>,
  deadLetters: boolean
): ReadonlyArray<{ readonly topic: string; readonly deadLetterOf: string | null }> => {
  const out = new Map<string, string | null>()
  for (const topic of topics) {
    if (!out.has(topic)) out.set(topic, null)
    const dlt = DeadLetter.defaultTopic(topic)
    if (deadLetters && !topic.endsWith(".DLT") && !out.has(dlt)) out.set(dlt, topic)
  }
  return [...out].map(([topic, deadLetterOf]) => ({ topic, deadLetterOf }))
}

/**
 * Creates each missing topic and dead-letter topic with `partitions` partitions (dry run unless
 * `execute`); existing ones are left as they are.
 *
 * @since 0.1.0
 * @category topics
 */
export const ensureTopics = (options: {
  readonly topics: ReadonlyArray<string>
  readonly partitions: number
  readonly deadLetters: boolean
  readonly execute: boolean
}): Effect.Effect<ReadonlyArray<EnsuredTopic>, OperatorError | BrokerAdminError, BrokerAdmin> =>
  Effect.gen(function* () {
    if (options.topics.length === 0) return yield* new OperatorError({ reason: "name at least one topic" })
    if (!Number.isInteger(options.partitions) || options.partitions < 1) {
      return yield* new OperatorError({ reason: `--partitions must be an integer >= 1, got ${options.partitions}` })
    }
    const admin = yield* BrokerAdmin
    return yield* Effect.forEach(withDeadLetterTopics(options.topics, options.deadLetters), ({ deadLetterOf, topic }) =>
      Effect.gen(function* () {
        const existing = yield* admin.partitionCount(topic)
        if (Option.isSome(existing)) {
          return { topic, deadLetterOf, action: "exists", partitions: existing.value } satisfies EnsuredTopic
        }
        if (options.execute) yield* admin.ensureTopic({ topic, partitions: options.partitions })
        const action = options.execute ? "created" : "would create"
        return { topic, deadLetterOf, action, partitions: options.partitions } satisfies EnsuredTopic
      })
    )
  })

/**
 * A topic the outbox's rows use, and what the broker has of it and of its `<topic>.DLT`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutboxTopic {
  readonly topic: string
  readonly rows: number
  /** Partitions on the broker, `null` when missing there. */
  readonly partitions: number | null
  readonly deadLetterPartitions: number | null
}

/**
 * The topics of the outbox's rows (any status), with their partition counts and dead-letter
 * topics on the broker.
 *
 * @since 0.1.0
 * @category topics
 */
export const outboxTopics: Effect.Effect<
  ReadonlyArray<OutboxTopic>,
  StoreError | BrokerAdminError,
  ReadModel | BrokerAdmin
> = Effect.gen(function* () {
  const counts = yield* (yield* ReadModel).perTopic
  const admin = yield* BrokerAdmin
  return yield* Effect.forEach(counts, (row) =>
    Effect.gen(function* () {
      const partitions = yield* admin.partitionCount(row.topic)
      const deadLetters = yield* admin.partitionCount(DeadLetter.defaultTopic(row.topic))
      const rows = Object.values(row.byStatus).reduce((total: number, n) => total + (n ?? 0), 0)
      return {
        topic: row.topic,
        rows,
        partitions: Option.getOrNull(partitions),
        deadLetterPartitions: Option.getOrNull(deadLetters)
      } satisfies OutboxTopic
    })
  )
})
