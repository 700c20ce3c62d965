/**
 * What the relay and stale recovery do when a record targets a partition the broker does not
 * have: one switch (`OUTBOX_RELAY_UNKNOWN_PARTITION`), one way to ask `BrokerAdmin`, one
 * wording.
 *
 * - `"fail"` (default): `FAILURE` with a reason naming the topic, partition and partition count.
 * - `"sync"`: grow the topic to include the partition (the database assignment says it should
 *   exist), never past `OUTBOX_MAX_PARTITION`, then retry.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import type { BrokerAdminError, UnknownPartitionError } from "./Errors.ts"
import * as Vars from "./internal/variables.ts"
import * as PartitionLimit from "./PartitionLimit.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Policy = "fail" | "sync"

/**
 * The policy, and the partition `"sync"` never grows a topic past (default 1023).
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly unknownPartition: Policy
  readonly maxPartition?: number | undefined
}

/**
 * `OUTBOX_RELAY_UNKNOWN_PARTITION`: `fail` (default) or `sync`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Policy> = Vars.relay.unknownPartition.config

/**
 * What became of the partition:
 *
 * - `"exists"`: the topic has it (the trouble lies elsewhere, or the topic grew meanwhile);
 * - `"grown"`: `"sync"` grew the topic to include it: retry;
 * - `"fail"`: give the record up (`FAILURE`) with `reason`;
 * - `"unknown"`: the broker could not tell or could not grow the topic (no `BrokerAdmin`, no such
 *   topic, an admin error).
 *
 * @since 0.1.0
 * @category models
 */
export type Resolution =
  | { readonly _tag: "exists" }
  | { readonly _tag: "grown"; readonly reason: string }
  | { readonly _tag: "fail"; readonly reason: string }
  | { readonly _tag: "unknown"; readonly reason: string }

const switchedOff = (what: string): Resolution => ({
  _tag: "fail",
  reason: `${what}; unknown-partition recovery is off (OUTBOX_RELAY_UNKNOWN_PARTITION=fail): fix the record's partition or grow the topic, then requeue`
})

/**
 * Applies the policy to `partition` of `topic`. `reported` is the publisher's error when the
 * broker already said the partition is missing; without it (stale recovery after a failed probe)
 * the partition count is asked first, and a partition that exists is left alone.
 *
 * @since 0.1.0
 * @category recovery
 */
export const resolve = (
  settings: Settings,
  topic: string,
  partition: number,
  reported?: UnknownPartitionError
): Effect.Effect<Resolution> =>
  Effect.gen(function* (): Effect.fn.Return<Resolution, BrokerAdminError> {
    // The reason names the error class, as every other FAILURE reason does (operators grep for it).
    if (reported !== undefined && settings.unknownPartition === "fail") {
      return switchedOff(`${reported._tag}: ${reported.message}`)
    }
    const admin = yield* Effect.serviceOption(BrokerAdmin)
    if (Option.isNone(admin)) return { _tag: "unknown", reason: "no BrokerAdmin service is provided" }
    const count = yield* admin.value.partitionCount(topic)
    if (Option.isNone(count)) return { _tag: "unknown", reason: `topic ${topic} does not exist` }
    if (count.value > partition) return { _tag: "exists" }
    const what = `topic ${topic} has no partition ${partition} (it has ${count.value})`
    if (settings.unknownPartition === "fail") return switchedOff(what)
    const above = PartitionLimit.aboveMaximum(partition, settings.maxPartition)
    if (above !== undefined) return { _tag: "fail", reason: `${what}; ${above}; the topic is not grown` }
    yield* admin.value.growPartitions(topic, partition + 1)
    yield* Effect.logWarning(`outbox grew ${topic} from ${count.value} to ${partition + 1} partitions`)
    return { _tag: "grown", reason: what }
  }).pipe(Effect.catch((error) => Effect.succeed<Resolution>({ _tag: "unknown", reason: error.message })))
