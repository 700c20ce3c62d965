/**
 * The scaffolding the broker-facing suites share: uniquely named topics per test, deleted (when
 * the adapter can) as the test ends, on a fresh layer per test.
 *
 * @internal
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { uniqueName } from "../conformance.ts"

/** The options every broker-facing suite takes (public as `BrokerSuite.BrokerSuiteOptions`). */
export interface BrokerSuiteOptions<S, R = never> {
  /** Fresh services for every test; may provide extra services `R` that `deleteTopics` uses. */
  readonly layer: () => Layer.Layer<S | R, unknown>
  /**
   * Called when a test ends with the topics it created, so a shared broker does not keep them.
   * Failures are ignored. Default: topics are left behind (their names start with `topicPrefix`).
   */
  readonly deleteTopics?: ((topics: ReadonlyArray<string>) => Effect.Effect<void, unknown, S | R>) | undefined
  /** Prefix of every topic the suite creates (each suite has its own default). */
  readonly topicPrefix?: string | undefined
  /** Per-test timeout in milliseconds (default 120 000). */
  readonly timeout?: number | undefined
}

export const scaffold = <S, R>(options: BrokerSuiteOptions<S, R>, defaultPrefix = "conformance") => {
  const prefix = options.topicPrefix ?? defaultPrefix
  const deleteTopics = options.deleteTopics
  /** Topics created by the running test (tests of one suite run one at a time). */
  let created: Array<string> = []
  /** A fresh topic name, deleted as the test ends; the topic itself is not created. */
  const topicName = () => {
    const topic = uniqueName(prefix)
    created.push(topic)
    return topic
  }
  /** A fresh topic with `partitions` partitions, deleted as the test ends. */
  const makeTopic = (partitions: number) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = topicName()
      yield* admin.ensureTopic({ topic, partitions })
      return topic
    })
  /** Runs one test's body on a fresh layer, then deletes the topics it created (failures ignored). */
  const fresh = <A, E>(body: Effect.Effect<A, E, S>) => {
    created = []
    const cleanup = Effect.suspend(() =>
      deleteTopics === undefined || created.length === 0 ? Effect.void : Effect.ignore(deleteTopics(created))
    )
    return Effect.provide(Effect.ensuring(body, cleanup), options.layer())
  }
  return { topics: { prefix, topicName, makeTopic }, fresh }
}

export type Topics = ReturnType<typeof scaffold>["topics"]
