/**
 * Stale recovery's judgement of one expired lease: is the row's record on the broker? A probe
 * error on an explicit partition may mean the topic lacks it: the unknown-partition policy
 * decides.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BrokerProbe } from "../../BrokerProbe.ts"
import type { ProbeError } from "../../Errors.ts"
import type { OutboxMessage, PublishReceipt } from "../../OutboxMessage.ts"
import * as UnknownPartition from "../../UnknownPartition.ts"

export type Verdict =
  | { readonly _tag: "found"; readonly receipt: PublishReceipt }
  | { readonly _tag: "absent" }
  | { readonly _tag: "unknown_partition"; readonly reason: string; readonly retry: boolean }
  | { readonly _tag: "error"; readonly reason: string }

export const judge = (row: OutboxMessage, s: UnknownPartition.Settings): Effect.Effect<Verdict, never, BrokerProbe> =>
  Effect.gen(function* () {
    const probe = yield* BrokerProbe
    const found = yield* probe
      // A DISPATCHING row was last written by its claim: `updatedAt` is the claim time.
      .find({
        topic: row.topic,
        partition: row.partition,
        eventId: row.id,
        since: Math.max(row.createdAt, row.updatedAt)
      })
      .pipe(
        Effect.map(
          (receipt): Verdict =>
            Option.isSome(receipt) ? { _tag: "found", receipt: receipt.value } : { _tag: "absent" }
        ),
        Effect.catch((error: ProbeError) => Effect.succeed<Verdict>({ _tag: "error", reason: error.message }))
      )
    if (found._tag !== "error" || row.partition === null) return found
    // A probe error on an explicit partition may mean the partition does not exist.
    const resolved = yield* UnknownPartition.resolve(s, row.topic, row.partition)
    switch (resolved._tag) {
      case "fail":
        return { _tag: "unknown_partition", retry: false, reason: resolved.reason }
      case "grown":
        return { _tag: "unknown_partition", retry: true, reason: resolved.reason }
      default:
        return found
    }
  })
