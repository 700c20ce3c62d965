/**
 * Which Effect log level a kafkajs log line gets.
 *
 * @internal
 */
import type * as LogLevel from "effect/LogLevel"
import Kafkajs from "kafkajs"

/**
 * kafkajs logs every broker error response at ERROR, including the ones it retries and the ones
 * our callers turn into typed errors; those are debug noise. So is each failed connection attempt
 * (the seed broker's "Failed to connect", a refused socket): it retries them, and what outlasts the
 * retries reaches the caller as one typed error naming the brokers and the cause. Warnings we
 * chose to accept (our idempotent producer limits retries on purpose, see docs/kafka.md) are
 * debug too.
 */
export const effectLevel = (level: Kafkajs.logLevel, namespace: string, message: string): LogLevel.Severity => {
  if (level === Kafkajs.logLevel.ERROR) {
    const connecting = namespace === "Connection" || namespace === "Producer" || message.includes("Failed to connect")
    return connecting ? "Debug" : "Warn"
  }
  if (level === Kafkajs.logLevel.WARN) {
    return message.includes("Limiting retries") || message.includes("switched default partitioner") ? "Debug" : "Warn"
  }
  if (level === Kafkajs.logLevel.INFO) return "Debug"
  return "Trace"
}

const repeatWindowMillis = 60_000

/**
 * A warning kafkajs repeats (every retry of every client) is logged at its level once a minute
 * per namespace and text; the repeats go to Debug.
 */
export const onceAMinute = (now: () => number = Date.now) => {
  const lastWarned = new Map<string, number>()
  return (severity: LogLevel.Severity, namespace: string, message: string): LogLevel.Severity => {
    if (severity !== "Warn") return severity
    const key = `${namespace}:${message}`
    const at = now()
    const last = lastWarned.get(key)
    if (last !== undefined && at - last < repeatWindowMillis) return "Debug"
    if (lastWarned.size > 1_000) lastWarned.clear()
    lastWarned.set(key, at)
    return severity
  }
}
