/**
 * W3C trace context in Kafka headers: the enqueueing transaction writes its span's
 * context into the event's `traceparent` header; the consumer parses it back and runs its handler
 * as a child of that span. Exported through `Telemetry`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import type { Headers } from "../../OutboxMessage.ts"

/**
 * The W3C trace-context header.
 *
 * @since 0.1.0
 * @category constants
 */
export const TRACEPARENT_HEADER = "traceparent"

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * Formats a span's context as a W3C `traceparent` value (`00-<trace>-<span>-<flags>`).
 *
 * @since 0.1.0
 * @category trace context
 */
export const formatTraceparent = (span: {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}): string => `00-${normalise(span.traceId, 32)}-${normalise(span.spanId, 16)}-${span.sampled ? "01" : "00"}`

// Effect's native tracer already produces hex ids of the right width; other tracers may not,
// and a malformed header is worse than a padded one.
const normalise = (id: string, width: number): string => {
  const hex = id.toLowerCase().replace(/[^0-9a-f]/g, "")
  return hex.length >= width ? hex.slice(-width) : hex.padStart(width, "0")
}

/**
 * Parses a `traceparent` value. Invalid values, version `ff` and all-zero ids are rejected, as
 * the W3C specification requires.
 *
 * @since 0.1.0
 * @category trace context
 */
export const parseTraceparent = (value: string): Option.Option<Tracer.ExternalSpan> => {
  const match = TRACEPARENT.exec(value.trim().toLowerCase())
  if (match === null) return Option.none()
  const [, version, traceId, spanId, flags] = match as unknown as [string, string, string, string, string]
  if (version === "ff" || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return Option.none()
  return Option.some(Tracer.externalSpan({ traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 }))
}

/**
 * Adds the current span's `traceparent` to `headers` (unchanged when no span is active or the
 * caller already set one).
 *
 * @since 0.1.0
 * @category trace context
 */
export const injectTraceparent = (headers: Headers): Effect.Effect<Headers> =>
  TRACEPARENT_HEADER in headers
    ? Effect.succeed(headers)
    : Effect.withFiber((fiber) => Effect.succeed(withTraceparent(headers, currentSpanOf(fiber.context))))

/**
 * The span `Effect.currentSpan` would answer in `context` (its `ParentSpan` when that is a span
 * of this process, not an external one), without running an effect.
 *
 * @internal
 */
export const currentSpanOf = (context: Context.Context<never>): Tracer.Span | undefined => {
  const span = Context.getOrUndefined(context, Tracer.ParentSpan)
  return span?._tag === "Span" ? span : undefined
}

/**
 * `headers` with `span`'s `traceparent` added: {@link injectTraceparent} as plain code.
 *
 * @internal
 */
export const withTraceparent = (headers: Headers, span: Tracer.Span | undefined): Headers =>
  span === undefined || TRACEPARENT_HEADER in headers
    ? headers
    : { ...headers, [TRACEPARENT_HEADER]: formatTraceparent(span) }

/**
 * The parent span a consumer should continue from, read from a record's headers.
 *
 * @since 0.1.0
 * @category trace context
 */
export const parentFromHeaders = (headers: Headers): Option.Option<Tracer.ExternalSpan> => {
  const value = headers[TRACEPARENT_HEADER]
  return value === undefined ? Option.none() : parseTraceparent(value)
}

/**
 * Runs `effect` as a child of the trace carried in `headers`, when there is one.
 *
 * @since 0.1.0
 * @category trace context
 */
export const withParentFromHeaders =
  (headers: Headers) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Option.match(parentFromHeaders(headers), {
      onNone: () => effect,
      onSome: (parent) => Effect.withParentSpan(effect, parent)
    })
