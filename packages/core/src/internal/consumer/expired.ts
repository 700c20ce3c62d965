/**
 * A record older than the inbox's deduplication window: the inbox no longer remembers whether it
 * ran, so it is never run as new without saying so. Under `"dead-letter"` the try fails with
 * `InboxWindowExpiredError` (not retriable: dead-lettered at once); under `"process"` it runs
 * with a record at the time of processing, so a later redelivery of it, within the retention
 * after that, is found and not run again. Both are logged at WARN; the inbox counts them in
 * `outbox_inbox_processed_total{outcome="expired"}`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { ConsumerRecord } from "../../ConsumerSource.ts"
import * as Inbox from "../../Inbox.ts"
import { type InboxStore, type ProcessedKey, recordTime } from "../../InboxStore.ts"

/** What an expired record comes to under the consumer's policy. */
export const resolve = (
  // Only what it reads of the record runner's settings (the runner imports this module).
  settings: {
    readonly groupId: string
    readonly onExpired: Inbox.ExpiredPolicy
    readonly inboxStore: Option.Option<InboxStore["Service"]>
    readonly inbox: Inbox.Inbox["Service"]
  },
  record: ConsumerRecord,
  key: ProcessedKey,
  work: Effect.Effect<unknown, unknown>
): Effect.Effect<"processed" | "already_processed", unknown> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const horizon = yield* Effect.match(
      settings.inboxStore._tag === "Some" ? settings.inboxStore.value.horizon : Effect.succeed(Number.NaN),
      { onFailure: () => Number.NaN, onSuccess: (h) => h }
    )
    const error = new Inbox.InboxWindowExpiredError({
      consumer: key.consumer,
      identity: key.identity,
      eventTime: recordTime(key, now),
      horizon,
      retriable: false
    })
    const where = `${record.topic}/${record.partition}@${record.offset}`
    const annotations = { consumer: settings.groupId, identity: key.identity, policy: settings.onExpired }
    if (settings.onExpired === "dead-letter") {
      yield* Effect.logWarning(`${where}: ${error.message}; dead-lettering it (onExpired: "dead-letter")`).pipe(
        Effect.annotateLogs(annotations)
      )
      return yield* Effect.fail(error)
    }
    yield* Effect.logWarning(
      `${where}: ${error.message}; processing it as new (onExpired: "process"): it may run a second time`
    ).pipe(Effect.annotateLogs(annotations))
    // Run once under this policy already (its record is kept at the time it ran): not again.
    if (settings.inboxStore._tag === "Some" && (yield* settings.inboxStore.value.exists(key))) {
      return "already_processed" as const
    }
    // Recorded at the time of processing, which the window holds.
    const outcome = yield* settings.inbox.processOnce(
      { consumer: key.consumer, identity: key.identity, eventTime: now },
      work
    )
    return outcome === "expired" ? yield* Effect.fail(error) : outcome
  })
