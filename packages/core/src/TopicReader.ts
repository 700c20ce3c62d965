/**
 * A read-only, group-less view of a topic, used to inspect and replay dead letters.
 *
 * adapter-kafka implements it with a consumer that joins no group (or a throwaway group that
 * never commits): fetch the partitions' low and high watermarks when the read starts, read each
 * partition from its low watermark up to that high watermark, and stop. Records appended after
 * the read started are not part of it, so a replay that republishes into the same cluster always
 * terminates.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Stream from "effect/Stream"
import type { ConsumerRecord } from "./ConsumerSource.ts"
import type { ConsumerSourceError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class TopicReader extends Context.Service<
  TopicReader,
  {
    /**
     * Every retained record of `topic` up to the high watermarks observed when the read starts:
     * each partition in offset order (partitions may interleave). Commits nothing, joins no group.
     * A topic that does not exist fails with a non-retriable `ConsumerSourceError` whose
     * `operation` is `"read"`.
     */
    readonly read: (topic: string) => Stream.Stream<ConsumerRecord, ConsumerSourceError>
  }
>()("@effect-outbox/core/TopicReader") {}
