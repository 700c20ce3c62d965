/**
 * How old the durably parked records are, against the topic's retention: parked records are
 * positions on the topic, so one older than `retention.ms` is deleted by the broker before its
 * release. The gauge shows the oldest age per topic; an ERROR log names each key whose oldest
 * record passed 80% of the retention, while there is still time to release it.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type { BrokerAdmin } from "../../BrokerAdmin.ts"
import type { ParkedKey, ParkedStore } from "../../ParkedStore.ts"
import * as Telemetry from "../../Telemetry.ts"

/** The share of the retention after which a parked record is reported. */
export const retentionWarningShare = 0.8

/**
 * Samples the group's parked ages each time it runs: the gauge per topic, and one ERROR per key
 * (and parking) once it passes the share of the retention.
 */
export const reportParkedAge = (
  groupId: string,
  store: ParkedStore["Service"],
  admin: BrokerAdmin["Service"] | undefined
): Effect.Effect<void> => {
  const reported = new Set<string>()
  return Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const keys = yield* store.list({ consumer: groupId })
    const byTopic = new Map<string, Array<ParkedKey>>()
    for (const key of keys) byTopic.set(key.topic, [...(byTopic.get(key.topic) ?? []), key])
    for (const [topic, parked] of byTopic) {
      const ages = parked.flatMap((k) =>
        k.parkedAt === undefined ? [] : [[k, Math.max(0, now - k.parkedAt)] as const]
      )
      const oldest = ages.reduce((max, [, age]) => Math.max(max, age), 0)
      yield* Metric.update(
        Metric.withAttributes(Telemetry.consumerParkedOldestAge, { group: groupId, topic }),
        oldest / 1_000
      )
      const retention = admin?.retentionMillis === undefined ? Option.none() : yield* admin.retentionMillis(topic)
      if (Option.isNone(retention)) continue
      for (const [key, age] of ages) {
        const id = `${key.partition}\u0000${key.key}\u0000${key.parkedAt}`
        if (age < retention.value * retentionWarningShare || reported.has(id)) continue
        reported.add(id)
        yield* Effect.logError(
          `parked key ${key.key} of ${topic}/${key.partition} (group ${groupId}) was parked ${Math.round(age / 1_000)} s ago; ` +
            `the topic keeps records ${Math.round(retention.value / 1_000)} s: release it before retention deletes its records`
        )
      }
    }
  }).pipe(Effect.catch((error) => Effect.logWarning(`sampling the parked records' age failed: ${error.message}`)))
}
