/**
 * A topic's layout out of a metadata answer that @platformatic/kafka turned into an error because
 * some partitions had no leader (Kafka reports `LEADER_NOT_AVAILABLE` on each such partition).
 * The client keeps the parsed answer on the error: the partitions with a leader are still
 * usable, the others are `leaderless`.
 *
 * @internal
 */
import type { TopicLayout } from "@effect-outbox/kafka/KafkaDriver"

interface RawPartition {
  readonly errorCode: number
  readonly partitionIndex: number
  readonly leaderId: number
}

interface RawTopic {
  readonly errorCode: number
  readonly name: string | null
  readonly partitions: ReadonlyArray<RawPartition>
}

const LEADER_NOT_AVAILABLE = 5

/** Every metadata answer attached to `error` or the errors it wraps. */
const answers = (error: unknown, depth = 0): Array<{ readonly topics: ReadonlyArray<RawTopic> }> => {
  if (typeof error !== "object" || error === null || depth > 6) return []
  const node = error as { readonly response?: unknown; readonly errors?: unknown; readonly cause?: unknown }
  const own =
    typeof node.response === "object" &&
    node.response !== null &&
    Array.isArray((node.response as { topics?: unknown }).topics)
      ? [node.response as { topics: ReadonlyArray<RawTopic> }]
      : []
  const inner = Array.isArray(node.errors) ? node.errors.flatMap((e) => answers(e, depth + 1)) : []
  return [...own, ...inner, ...(node.cause === undefined ? [] : answers(node.cause, depth + 1))]
}

/**
 * The layout of `topic` when `error` is a metadata answer whose only errors are partitions
 * without a leader; `undefined` otherwise (the error stands).
 */
export const fromError = (error: unknown, topic: string): TopicLayout | undefined => {
  for (const answer of answers(error)) {
    const found = answer.topics.find((t) => t.name === topic)
    if (found === undefined || found.errorCode !== 0 || found.partitions.length === 0) continue
    if (found.partitions.some((p) => p.errorCode !== 0 && p.errorCode !== LEADER_NOT_AVAILABLE)) continue
    const partitions = [...found.partitions].sort((a, b) => a.partitionIndex - b.partitionIndex)
    return {
      partitions: partitions.length,
      leaders: partitions.map((p) => (p.errorCode === 0 ? p.leaderId : -1)),
      leaderless: partitions.filter((p) => p.errorCode !== 0 || p.leaderId < 0).map((p) => p.partitionIndex)
    }
  }
  return undefined
}
