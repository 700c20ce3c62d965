import * as Effect from "effect/Effect"
import type * as Tracer from "effect/Tracer"

const noStackTrace = { captureStackTrace: false } as const

/**
 * A span on one of the library's running paths (per transaction, message, batch or window), opened
 * without a stack trace: a captured trace only names a line of this library and costs ~4 µs of
 * node CPU per span (docs/telemetry.md). Users' own spans keep Effect's default.
 */
export const runningSpan = (name: string, options?: Tracer.SpanOptions) => Effect.withSpan(name, options, noStackTrace)
