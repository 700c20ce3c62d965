/**
 * The Kafka layer's broker-call retry (`@effect-outbox/kafka/BrokerRetry`) on
 * @platformatic/kafka's error classification.
 *
 * @since 0.1.0
 */
import * as BrokerRetry from "@effect-outbox/kafka/BrokerRetry"
import type * as Effect from "effect/Effect"
import { protocol } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type BrokerRetryPolicy = BrokerRetry.BrokerRetryPolicy

/**
 * @since 0.1.0
 * @category references
 */
export const { CurrentPolicy, defaults } = BrokerRetry

/**
 * Retries `self` while `isRetriable` (default: `isRetriableBrokerCall`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const retrying = <E>(operation: string, isRetriable?: (error: E) => boolean) =>
  BrokerRetry.retrying<E>(protocol, operation, isRetriable)

/**
 * A promise-returning broker call, retried while retriable.
 *
 * @since 0.1.0
 * @category combinators
 */
export const brokerCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, unknown> =>
  BrokerRetry.brokerCall(protocol, operation, call)
