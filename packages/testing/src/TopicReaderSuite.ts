/**
 * The conformance suite of the `TopicReader` port (dead-letter inspection and replay): a
 * read returns every retained record of a topic as it was when the read started — each
 * partition in offset order, the records as they were published — then ends; it commits
 * nothing, so reading again returns the same records; a missing topic is a non-retriable read
 * error. Records published while the read runs are not part of it, so a replay into the same
 * topic terminates.
 *
 * Each test creates its own uniquely named topics through `BrokerAdmin` and publishes through
 * `Publisher`, so the suite runs against a shared real broker. The suite is a table of named
 * cases (Watermill's shape): each row names a behaviour and its case function under
 * `internal/suites/topicReader/`.
 *
 * @since 0.1.0
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import type * as BrokerSuite from "./BrokerSuite.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Reads from "./internal/suites/topicReader/reads.ts"
import type * as Support from "./internal/suites/topicReader/support.ts"
import * as Topics from "./internal/suites/topics.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = TopicReader | Publisher | BrokerAdmin

/**
 * `topicPrefix` defaults to `"reader-conformance"`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> extends BrokerSuite.BrokerSuiteOptions<Services, R> {}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Reads.readsEverything,
  Reads.emptyTopic,
  Reads.missingTopic,
  Reads.replayTerminates,
  Reads.commitsNothing,
  Reads.readsBeyondOneFetch,
  Reads.readsByPosition
]

/**
 * Registers the suite under `describe(name)`: every case on a fresh layer with its own topics.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const { topics, fresh } = Topics.scaffold(options, "reader-conformance")
  SuiteCase.register(`${name} (TopicReader conformance)`, cases, {
    features: {},
    run: (c) => fresh(c.run(topics)),
    timeout: options.timeout ?? 120_000
  })
}
