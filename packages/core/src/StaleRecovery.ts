/**
 * Stale dispatch recovery (R3): rows left `DISPATCHING` past their lease (a relay crashed or
 * hung) are taken back. A timeout does not prove that nothing reached Kafka, so each row's
 * target is probed for a record carrying its event id first:
 *
 * - found → `PUBLISHED` with that receipt;
 * - not found → back to `PENDING` (conditional on the stale lease, so a row re-claimed in the
 *   meantime is left alone);
 * - probe error → left for the next round.
 *
 * Rows of one key are handled in creation order and, like in the relay, once a row of a key is
 * requeued or left, the later rows of that key are requeued or left too: a key's published rows
 * always form a prefix of its creation order (see `docs/ordering.md`).
 *
 * A row whose explicit partition the topic does not have takes the unknown-partition path (R3.3)
 * behind the `unknownPartition` switch: `"sync"` grows the topic and requeues, `"fail"` moves it
 * to `FAILURE` with a reason.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import { BrokerProbe } from "./BrokerProbe.ts"
import type { OutboxStoreError, ProbeError } from "./Errors.ts"
import type { OutboxMessage, PublishReceipt } from "./OutboxMessage.ts"
import { OutboxStore } from "./OutboxStore.ts"
import * as PartitionLimit from "./PartitionLimit.ts"
import type { UnknownPartitionPolicy } from "./Relay.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Stale rows handled per round. */
  readonly batchSize: number
  /** Time between rounds. */
  readonly interval: Duration.Duration
  readonly unknownPartition: UnknownPartitionPolicy
  /** `"sync"` never grows a topic past this partition (`OUTBOX_MAX_PARTITION`, default 1023, M4). */
  readonly maxPartition?: number
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  batchSize: 100,
  interval: Duration.seconds(15),
  unknownPartition: "fail"
}

/**
 * `OUTBOX_STALE_BATCH_SIZE`, `OUTBOX_STALE_INTERVAL`, `OUTBOX_RELAY_UNKNOWN_PARTITION`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  batchSize: Config.Int("OUTBOX_STALE_BATCH_SIZE").pipe(Config.withDefault(defaults.batchSize)),
  interval: Config.Duration("OUTBOX_STALE_INTERVAL").pipe(Config.withDefault(defaults.interval)),
  unknownPartition: Config.Literals(["fail", "sync"], "OUTBOX_RELAY_UNKNOWN_PARTITION").pipe(
    Config.withDefault<UnknownPartitionPolicy>("fail")
  ),
  maxPartition: PartitionLimit.config
})

/**
 * A crash-test seam: called after the probes of a round, before any row is settled.
 *
 * @since 0.1.0
 * @category testing
 */
export interface HooksShape {
  readonly afterProbe: (rows: ReadonlyArray<OutboxMessage>) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category testing
 */
export const Hooks = Context.Reference<HooksShape>("@effect-outbox/core/StaleRecovery/Hooks", {
  defaultValue: () => ({ afterProbe: () => Effect.void })
})

/**
 * What one round did.
 *
 * @since 0.1.0
 * @category models
 */
export interface RoundResult {
  readonly stale: number
  readonly found: number
  readonly requeued: number
  readonly failed: number
  readonly left: number
}

type Verdict =
  | { readonly _tag: "found"; readonly receipt: PublishReceipt }
  | { readonly _tag: "absent" }
  | { readonly _tag: "unknown_partition"; readonly reason: string; readonly retry: boolean }
  | { readonly _tag: "error"; readonly reason: string }

/**
 * One round: find expired leases, probe, settle.
 *
 * @since 0.1.0
 * @category recovery
 */
export const runOnce = (
  settings: Partial<Settings> = {}
): Effect.Effect<RoundResult, OutboxStoreError, OutboxStore | BrokerProbe> =>
  Effect.gen(function* () {
    const s: Settings = { ...defaults, ...settings }
    const store = yield* OutboxStore
    const hooks = yield* Hooks
    const now = yield* Clock.currentTimeMillis
    const stale = [...(yield* store.findStale(now, s.batchSize))].sort((a, b) => a.seq - b.seq)
    if (stale.length === 0) return { stale: 0, found: 0, requeued: 0, failed: 0, left: 0 }

    const verdicts = yield* Effect.forEach(stale, (row) => judge(row, s), { concurrency: 8 })
    yield* hooks.afterProbe(stale)

    const published: Array<Transition.Published> = []
    const requeue: Array<{ id: OutboxMessage["id"]; staleOwner: string }> = []
    const failed: Array<{ id: OutboxMessage["id"]; owner: string; reason: string }> = []
    let left = 0
    // Per key, the first row that is not found decides the fate of the later ones.
    const blocked = new Map<string, "requeue" | "leave">()
    stale.forEach((row, i) => {
      const verdict = verdicts[i]!
      const staleOwner = row.leaseOwner ?? ""
      const block = row.key === null ? undefined : blocked.get(row.key)
      if (block === "leave") {
        left++
        return
      }
      if (block === "requeue") {
        requeue.push({ id: row.id, staleOwner })
        return
      }
      switch (verdict._tag) {
        case "found":
          published.push({ id: row.id, receipt: verdict.receipt })
          return
        case "absent":
          requeue.push({ id: row.id, staleOwner })
          if (row.key !== null) blocked.set(row.key, "requeue")
          return
        case "unknown_partition":
          if (verdict.retry) {
            requeue.push({ id: row.id, staleOwner })
            if (row.key !== null) blocked.set(row.key, "requeue")
          } else {
            failed.push({ id: row.id, owner: staleOwner, reason: verdict.reason })
            // The failed row no longer blocks its key; the later rows are probed on their own.
          }
          return
        case "error":
          left++
          if (row.key !== null) blocked.set(row.key, "leave")
          return
      }
    })

    if (published.length > 0) yield* Transition.markPublished(published)
    if (requeue.length > 0) yield* Transition.requeueStale(requeue)
    if (failed.length > 0) yield* Transition.failDispatching(failed)

    const count = (result: string, n: number) =>
      n === 0 ? Effect.void : Metric.update(Metric.withAttributes(Telemetry.staleRecovered, { result }), n)
    yield* count("found", published.length)
    yield* count("requeued", requeue.length)
    yield* count("failed", failed.length)
    yield* count("probe_error", left)
    yield* Effect.logInfo(
      `outbox stale recovery: ${stale.length} expired leases, ${published.length} found on the broker, ` +
        `${requeue.length} requeued, ${failed.length} failed, ${left} left for the next round`
    )
    return { stale: stale.length, found: published.length, requeued: requeue.length, failed: failed.length, left }
  }).pipe(Effect.withSpan(Telemetry.spans.staleRecovery))

const judge = (row: OutboxMessage, s: Settings): Effect.Effect<Verdict, never, BrokerProbe> =>
  Effect.gen(function* () {
    const probe = yield* BrokerProbe
    const found = yield* probe
      .find({ topic: row.topic, partition: row.partition, eventId: row.id, since: row.createdAt })
      .pipe(
        Effect.map(
          (receipt): Verdict =>
            Option.isSome(receipt) ? { _tag: "found", receipt: receipt.value } : { _tag: "absent" }
        ),
        Effect.catch((error: ProbeError) => Effect.succeed<Verdict>({ _tag: "error", reason: error.message }))
      )
    if (found._tag !== "error" || row.partition === null) return found
    // A probe error on an explicit partition may mean the partition does not exist (R3.3).
    const admin = yield* Effect.serviceOption(BrokerAdmin)
    if (Option.isNone(admin)) return found
    const count = yield* admin.value.partitionCount(row.topic).pipe(Effect.option)
    if (Option.isNone(count) || Option.isNone(count.value) || count.value.value > row.partition) return found
    const partitions = count.value.value
    const what = `topic ${row.topic} has no partition ${row.partition} (it has ${partitions})`
    if (s.unknownPartition === "fail") {
      return {
        _tag: "unknown_partition",
        retry: false,
        reason: `${what}; unknown-partition recovery is off (OUTBOX_RELAY_UNKNOWN_PARTITION=fail): fix the partition or grow the topic, then requeue`
      }
    }
    const above = PartitionLimit.aboveMaximum(row.partition, s.maxPartition)
    if (above !== undefined) return { _tag: "unknown_partition", retry: false, reason: `${what}; ${above}` }
    const grown = yield* admin.value.growPartitions(row.topic, row.partition + 1).pipe(Effect.option)
    return Option.isSome(grown) ? { _tag: "unknown_partition", retry: true, reason: what } : found
  })

/**
 * Runs a round every `interval`, forever. Errors of a round are logged; the next round retries.
 *
 * @since 0.1.0
 * @category recovery
 */
export const run = (settings: Partial<Settings> = {}): Effect.Effect<never, never, OutboxStore | BrokerProbe> => {
  const s: Settings = { ...defaults, ...settings }
  return runOnce(s).pipe(
    Effect.catch((error) => Effect.logWarning(`outbox stale recovery round failed: ${error.message}`)),
    Effect.andThen(Effect.sleep(s.interval)),
    Effect.forever
  )
}

/**
 * Starts {@link run} in the current scope.
 *
 * @since 0.1.0
 * @category recovery
 */
export const start = (
  settings: Partial<Settings> = {}
): Effect.Effect<void, never, OutboxStore | BrokerProbe | Scope.Scope> =>
  Effect.asVoid(Effect.forkScoped(run(settings)))

/**
 * Recovery running for the life of the layer, configured from {@link config}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, Config.ConfigError, OutboxStore | BrokerProbe> = Layer.effectDiscard(
  Effect.gen(function* () {
    yield* start(yield* config)
  })
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (settings: Partial<Settings>): Layer.Layer<never, never, OutboxStore | BrokerProbe> =>
  Layer.effectDiscard(start(settings))
