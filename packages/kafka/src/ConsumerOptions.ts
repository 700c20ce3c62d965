/**
 * The consumer-group settings every driver's `ConsumerSource` takes, and their defaults.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export interface ConsumerOptions {
  /** Default 30000. Small values notice dead members sooner. */
  readonly sessionTimeoutMillis?: number | undefined
  /** Default 60000: how long a rebalance waits for members to rejoin. */
  readonly rebalanceTimeoutMillis?: number | undefined
  /** Default 3000; also the heartbeat period while a batch is being processed. */
  readonly heartbeatIntervalMillis?: number | undefined
  /**
   * Longest a fetch waits for data: default 500 on kafkajs (as the Java client's
   * `fetch.max.wait.ms`; kafkajs's own is 5000), 5000 on @platformatic/kafka. Closing a kafkajs
   * consumer waits for the fetch in flight, so this bounds its shutdown.
   */
  readonly maxWaitTimeMillis?: number | undefined
  /** Bytes per partition per fetch (the client's default 1 MiB): bounds a batch. */
  readonly maxBytesPerPartition?: number | undefined
  /** Upper bound on one commit, retries included (default 10000). */
  readonly commitTimeoutMillis?: number | undefined
}

/**
 * The group timings with their defaults filled in.
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupTimings {
  readonly sessionTimeout: number
  readonly rebalanceTimeout: number
  readonly heartbeatInterval: number
}

/**
 * @since 0.1.0
 * @category defaults
 */
export const groupTimings = (options: ConsumerOptions): GroupTimings => ({
  sessionTimeout: options.sessionTimeoutMillis ?? 30_000,
  rebalanceTimeout: options.rebalanceTimeoutMillis ?? 60_000,
  heartbeatInterval: options.heartbeatIntervalMillis ?? 3_000
})

/**
 * @since 0.1.0
 * @category defaults
 */
export const commitTimeoutMillis = (options: ConsumerOptions): number => options.commitTimeoutMillis ?? 10_000
