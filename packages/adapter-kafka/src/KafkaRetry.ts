/**
 * The Kafka layer's broker-call retry (`@effect-outbox/kafka/BrokerRetry`) on kafkajs's error
 * classification. kafkajs retries inside each call as well (its `retry` setting); this policy
 * covers what outlasts those retries, such as a coordinator that takes longer to load than
 * kafkajs waits.
 *
 * @since 0.1.0
 */
import * as BrokerRetry from "@effect-outbox/kafka/BrokerRetry"
import type * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import { protocol } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type BrokerRetryPolicy = BrokerRetry.BrokerRetryPolicy

/**
 * @since 0.1.0
 * @category models
 */
export const { CurrentPolicy, defaults, schedule } = BrokerRetry

/**
 * @since 0.1.0
 * @category models
 */
export interface RetryingOptions<E> {
  /** Which errors to retry (default `KafkaErrors.isRetriableBrokerCall`). */
  readonly isRetriable?: ((error: E) => boolean) | undefined
}

/**
 * Retries `self` while its error is retriable, on `schedule(CurrentPolicy)`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const retrying: {
  <E>(operation: string, options?: RetryingOptions<E>): <A, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, operation: string, options?: RetryingOptions<E>): Effect.Effect<A, E, R>
} = dual(
  (args) => typeof args[0] !== "string",
  <A, E, R>(self: Effect.Effect<A, E, R>, operation: string, options?: RetryingOptions<E>): Effect.Effect<A, E, R> =>
    BrokerRetry.retrying<E>(protocol, operation, options?.isRetriable)(self)
)

/**
 * A kafkajs call, retried as `retrying` says; fails with the raw kafkajs error.
 *
 * @since 0.1.0
 * @category constructors
 */
export const brokerCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, unknown> =>
  BrokerRetry.brokerCall(protocol, operation, call)
