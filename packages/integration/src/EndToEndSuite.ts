/**
 * The whole pipeline on real services, one scenario every Kafka adapter runs: events
 * enqueued in committed and rolled-back PostgreSQL transactions, two relays publishing through
 * the adapter's Publisher, one consumer group of two members on its ConsumerSource applying an
 * effect in PostgreSQL. Checked: no loss, no phantom, per-key order on the broker and in the
 * effects, every effect applied exactly once.
 *
 * The scale is 10,000 events (about 90 s on two shared cores); that is what CI runs (`CI`
 * set). Locally the default is 2,000 so a full integration run stays quick; set E2E_EVENTS to
 * choose.
 *
 * The scenario is a table of named cases like every conformance suite
 * (`@effect-outbox/testing/SuiteCase`); its case functions live under `endToEnd/`.
 *
 * @since 0.1.0
 */

import * as SuiteCase from "@effect-outbox/testing/SuiteCase"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Pipeline from "./endToEnd/pipeline.ts"
import { type Case, type KafkaPorts, live } from "./endToEnd/support.ts"

export type { KafkaPorts } from "./endToEnd/support.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /**
   * Both members run with key-ordered concurrency, this many handlers per partition
   * (`concurrency: { by: "key", perPartition }`); default off (one record at a time).
   */
  readonly keyConcurrency?: number
  /** Names the `describe` block: which client runs the pipeline. */
  readonly name: string
  /** Prefix of the topic and group names, unique per adapter. */
  readonly prefix: string
  /** The adapter's layer (client included). */
  readonly kafka: Layer.Layer<KafkaPorts | R, unknown>
  /** A PostgreSQL client with at least 12 connections. */
  readonly pg: Layer.Layer<SqlClient.SqlClient, unknown>
  /** A fresh schema name; the scenario migrates it and drops it at the end. */
  readonly schema: string
  /** Creates `topic` with `partitions` partitions, deleted when the scope closes. */
  readonly namedTopic: (
    topic: string,
    partitions: number
  ) => Effect.Effect<unknown, unknown, KafkaPorts | R | Scope.Scope>
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Case> = [Pipeline.exactlyOnce]

/**
 * Registers the scenario under `describe(options.name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(options: Options<R>): void => {
  const { namedTopic, prefix, schema } = options
  SuiteCase.register(options.name, cases, {
    features: {},
    run: (c) =>
      Effect.gen(function* () {
        // Topics are created through this test's adapter services, in its scope.
        const services = yield* Effect.context<KafkaPorts | R | Scope.Scope>()
        return yield* c.run({
          prefix,
          schema,
          keyConcurrency: options.keyConcurrency,
          namedTopic: (topic, partitions) => Effect.provide(namedTopic(topic, partitions), services)
        })
      }).pipe(
        Effect.scoped,
        Effect.provide(live(schema, options.pg, options.kafka)),
        // The pipeline provides every service the case needs, the adapter's `R` included;
        // TypeScript cannot subtract a generic `R` from the requirements by itself.
        (provided) => provided as Effect.Effect<unknown, unknown>
      ),
    timeout: 240_000
  })
}
