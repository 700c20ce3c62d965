/**
 * The conformance suite of the `ConsumerSource` port: ordered delivery, commit-then-resume and
 * crash redelivery. Records are produced through `Publisher` on topics the suite creates with
 * `BrokerAdmin.ensureTopic` under unique names; waits use real (generous) timeouts so the same
 * suite runs against a real broker, where joining a consumer group takes seconds.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/consumerSource/`.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Duration from "effect/Duration"
import type * as BrokerSuite from "./BrokerSuite.ts"
import * as Commits from "./internal/suites/consumerSource/commits.ts"
import * as Delivery from "./internal/suites/consumerSource/delivery.ts"
import * as Groups from "./internal/suites/consumerSource/groups.ts"
import * as Positions from "./internal/suites/consumerSource/positions.ts"
import * as Support from "./internal/suites/consumerSource/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Topics from "./internal/suites/topics.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = ConsumerSource | Publisher | BrokerAdmin

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Several live members of one group share its partitions without losing records. */
  readonly groupMembers?: boolean
  /**
   * A running group notices partitions added to its topic (at a metadata refresh) and reads them.
   * Off for a client that reassigns partitions only when the group itself rebalances
   * (@platformatic/kafka 2.12: see docs/kafka.md).
   */
  readonly partitionGrowth?: boolean
}

/**
 * `topicPrefix` defaults to `"conformance"`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> extends BrokerSuite.BrokerSuiteOptions<Services, R> {
  readonly features?: Features
  /** How long to wait for expected records (default 60 seconds). */
  readonly receiveTimeout?: Duration.Input
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<SuiteCase.Case<Support.Context, Services, Support.Feature & keyof Features>> = [
  Delivery.deliversInOffsetOrder,
  Delivery.roundTripsBytes,
  Delivery.waitsForLaterRecords,
  Commits.resumesAtCommittedOffset,
  Commits.redeliversWithoutCommit,
  Commits.commitCoversPartitions,
  Groups.groupsAreIndependent,
  Delivery.hundredsInOrder,
  Delivery.slowMemberKeepsReceiving,
  Delivery.severalTopics,
  Commits.groupOffsetsFollowCommits,
  Positions.defaultReadsFromEarliest,
  Positions.resetLatestSkipsBacklog,
  Positions.grownPartitionFromFirstRecord,
  Positions.pausedPartitionWaits,
  Groups.twoMembersShareGroup,
  Groups.rebalancedBatchesNotCurrent
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer with its own topics.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { groupMembers: true, partitionGrowth: true, ...options.features }
  const timeout = options.timeout ?? 120_000
  const { topics, fresh } = Topics.scaffold(options)
  const context = Support.context(topics, options.receiveTimeout ?? Duration.seconds(60))
  describe(`${name} (ConsumerSource conformance)`, () => {
    for (const c of SuiteCase.enabled(cases, features)) it.live(c.name, () => fresh(c.run(context)), timeout)
  })
}
