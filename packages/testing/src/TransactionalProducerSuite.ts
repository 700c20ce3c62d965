/**
 * The conformance suite of the `TransactionalProducer` port: a transaction's records and
 * its consumer group's offsets become visible together or not at all. A committed transaction's
 * records are read back (through `TopicReader`, which reads `read_committed`) where its receipts
 * say, and its offsets are the group's; an aborted one — a record the broker refuses, a missing
 * topic or partition, offsets it cannot commit, a producer fenced by a newer one with the same
 * `transactionalId` — leaves no record visible and no offset committed.
 *
 * Kafka writes a transaction's commit markers just after `commit` returns, so visibility is
 * awaited (up to 15 s), never assumed at once. Each test creates its own uniquely named topics
 * through `BrokerAdmin`. The suite is a table of named cases (Watermill's shape): each row names a
 * behaviour, the feature it needs, and its case function under
 * `internal/suites/transactionalProducer/`.
 *
 * @since 0.1.0
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import type { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as BrokerSuite from "./BrokerSuite.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Topics from "./internal/suites/topics.ts"
import * as Aborts from "./internal/suites/transactionalProducer/aborts.ts"
import * as Commits from "./internal/suites/transactionalProducer/commits.ts"
import * as Fencing from "./internal/suites/transactionalProducer/fencing.ts"
import type * as Support from "./internal/suites/transactionalProducer/support.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = TransactionalProducer | TopicReader | BrokerAdmin | ConsumerSource

/**
 * A producer with the given `transactionalId`, built in the test's scope.
 *
 * @since 0.1.0
 * @category models
 */
export type MakeProducer<R> = (
  transactionalId: string
) => Effect.Effect<TransactionalProducer["Service"], unknown, Services | R | Scope.Scope>

/**
 * `layer` gives a producer with a fresh `transactionalId`; `topicPrefix` defaults to
 * `"tx-conformance"`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> extends BrokerSuite.BrokerSuiteOptions<Services, R> {
  /** Builds more producers, for the fencing case. Without it that case does not run. */
  readonly producer?: MakeProducer<R>
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Commits.commitsRecordsAndOffsets,
  Commits.successiveTransactions,
  Commits.offsetsAlone,
  Aborts.missingPartitionAborts,
  Aborts.missingTopicAborts,
  Aborts.uncommittableOffsetsAbort,
  Aborts.refusedRecordAborts,
  Aborts.newerProducerFences,
  Fencing.staleMembershipAborts
]

/**
 * Registers the cases the adapter offers under `describe(name)`, each on a fresh layer with its
 * own topics, in its own scope (the fencing case only when the adapter gives `producer`).
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const { topics, fresh } = Topics.scaffold(options, "tx-conformance")
  const producer = options.producer
  SuiteCase.register(`${name} (TransactionalProducer conformance)`, cases, {
    features: { producer: producer !== undefined },
    run: (c) =>
      fresh(
        Effect.scoped(
          Effect.gen(function* () {
            // More producers are built on this test's services, in its scope.
            const services = yield* Effect.context<Services | R | Scope.Scope>()
            return yield* c.run({
              topics,
              producer: (transactionalId) =>
                Effect.provide(producer?.(transactionalId) ?? Effect.die("no producer"), services)
            })
          })
        )
      ),
    timeout: options.timeout ?? 120_000
  })
}
