/**
 * The highest explicit partition a record may name. Enqueue refuses a partition above
 * it, and `unknownPartition: "sync"` (relay and stale recovery) never grows a topic past it: one
 * record with a mistaken `partition: 5000` would otherwise make the relay create 5,001
 * partitions, which Kafka cannot undo and which re-routes every keyed event of the topic.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import * as Vars from "./internal/variables.ts"

/**
 * Partitions 0–1023 (topics of up to 1,024 partitions): far above what one topic usually needs,
 * far below what a typo produces.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_PARTITION: number = Vars.outbox.maxPartition.value

/**
 * `OUTBOX_MAX_PARTITION`, default {@link DEFAULT_MAX_PARTITION}. Read by `Outbox.config`,
 * `Relay.config` and `StaleRecovery.config`, so the three agree.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<number> = Vars.outbox.maxPartition.config

/**
 * Why `partition` may not be used or grown to, or `undefined` when it is within `max`.
 *
 * @since 0.1.0
 * @category validation
 */
export const aboveMaximum = (partition: number, max: number = DEFAULT_MAX_PARTITION): string | undefined =>
  partition > max
    ? `partition ${partition} is above the maximum ${max} (OUTBOX_MAX_PARTITION); ` +
      `fix the record's partition, or raise OUTBOX_MAX_PARTITION if the topic really needs more partitions`
    : undefined
