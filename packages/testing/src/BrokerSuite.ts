/**
 * The conformance suite of the broker-facing ports `Publisher`, `BrokerProbe` and `BrokerAdmin`.
 * Each test builds a fresh layer and creates its own uniquely named topics through
 * `BrokerAdmin.ensureTopic`, so the suite runs against a shared real broker too.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/broker/`.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Admin from "./internal/suites/broker/admin.ts"
import * as Outage from "./internal/suites/broker/outage.ts"
import * as Probe from "./internal/suites/broker/probe.ts"
import * as Publish from "./internal/suites/broker/publish.ts"
import type * as Support from "./internal/suites/broker/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Topics from "./internal/suites/topics.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = Publisher | BrokerProbe | BrokerAdmin

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Publishing to a topic that does not exist fails with `PermanentPublishError`. */
  readonly missingTopicIsPermanent?: boolean
  /** `BrokerAdmin.retentionMillis` reads a topic's `retention.ms`. */
  readonly retention?: boolean
}

/**
 * The options every broker-facing suite (`BrokerSuite`, `ConsumerSourceSuite`,
 * `TopicReaderSuite`, `TransactionalProducerSuite`) takes for the services `S` it tests: a fresh
 * layer per test (which may provide extra services `R` for `deleteTopics`), how to delete the
 * topics a test created (failures ignored; default: left behind, named with `topicPrefix`), the
 * prefix of every topic it creates, and the per-test timeout in milliseconds (default 120 000).
 *
 * @since 0.1.0
 * @category models
 */
export type BrokerSuiteOptions<S, R = never> = Topics.BrokerSuiteOptions<S, R>

/**
 * `topicPrefix` defaults to `"conformance"`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> extends BrokerSuiteOptions<Services, R> {
  readonly features?: Features
  /**
   * The same adapter with a broker it cannot reach (a closed port, an in-memory broker in an
   * outage), for the outage case. Without it the case does not run.
   */
  readonly unreachable?: () => Layer.Layer<Services, unknown>
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<SuiteCase.Case<Topics.Topics, Services, Support.Feature & keyof Features>> = [
  Admin.ensureTopicOnce,
  Admin.concurrentEnsureTopic,
  Admin.growPartitionsNeverShrinks,
  Publish.receiptsInRequestOrder,
  Publish.partitionKeepsOrder,
  Publish.keyLandsOnOnePartition,
  Publish.unknownPartitionFails,
  Publish.missingTopicIsPermanent,
  Outage.unreachableBrokerUnavailable,
  Publish.oversizedBatchLands,
  Publish.oversizedRecordFailsAlone,
  Publish.emptyBatch,
  Probe.probeFindsRecord,
  Probe.findManyWindow,
  Probe.probeNoneForMissing,
  Probe.eventIdHeaderPolicy,
  Admin.commitGroupOffsetsReadBack,
  Admin.retentionRead
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer with its own topics (the outage case on `unreachable`, when given).
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { missingTopicIsPermanent: true, retention: true, ...options.features }
  const timeout = options.timeout ?? 120_000
  const { topics, fresh } = Topics.scaffold(options)
  const unreachable = options.unreachable
  describe(`${name} (Publisher, BrokerProbe, BrokerAdmin conformance)`, () => {
    for (const c of SuiteCase.enabled(cases, features)) {
      if (!c.unreachable) it.live(c.name, () => fresh(c.run(topics)), timeout)
      else if (unreachable !== undefined) {
        it.live(c.name, () => Effect.provide(c.run(topics), unreachable()), timeout)
      }
    }
  })
}
