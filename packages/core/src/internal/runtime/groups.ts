/**
 * What the runtime checks of its consumer groups before they start:
 * - each lifecycle-driving group is registered as its topics' driving group (`LifecycleRegistry`,
 *   when the storage provides one), so a second driving group in another process is refused;
 * - a group with no committed offsets on a topic says where it will start reading.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BrokerAdmin } from "../../BrokerAdmin.ts"
import { LifecycleRegistry } from "../../LifecycleRegistry.ts"

/** What the checks need of a declared consumer. */
export interface Group {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning?: boolean | undefined
  readonly lifecycle?: boolean | undefined
}

/** Registers every driving group; fails with the first conflict. No registry: nothing to do. */
export const registerDrivers = (groups: ReadonlyArray<Group>) =>
  Effect.gen(function* () {
    const registry = yield* Effect.serviceOption(LifecycleRegistry)
    if (Option.isNone(registry)) return
    for (const group of groups) {
      if (group.lifecycle === false) continue
      for (const topic of group.topics) yield* registry.value.register(topic, group.groupId)
    }
  })

// Start-up does not wait long on a slow broker for a log line; the consumer reports a lost broker.
const offsetsTimeout = Duration.seconds(3)

/**
 * One Info line per topic a group has never committed on, naming where it starts: a group that
 * joins a topic with history reads all of it by default, which is what a new group wants and what
 * an operator should not be surprised by. Best effort: needs `BrokerAdmin`, never fails start-up.
 */
export const logStartOffsets = (groups: ReadonlyArray<Group>) =>
  Effect.gen(function* () {
    const admin = yield* Effect.serviceOption(BrokerAdmin)
    if (Option.isNone(admin)) return
    for (const group of groups) {
      const offsets = yield* admin.value.groupOffsets({ groupId: group.groupId, topics: group.topics })
      for (const topic of group.topics) {
        const partitions = offsets.filter((o) => o.topic === topic)
        if (partitions.length === 0 || partitions.some((o) => o.committed !== null)) continue
        const where = group.fromBeginning === false ? "the latest offset (fromBeginning: false)" : "the earliest offset"
        yield* Effect.logInfo(`group ${group.groupId} has no committed offsets on ${topic}: reading from ${where}`)
      }
    }
  }).pipe(
    Effect.timeout(offsetsTimeout),
    Effect.catch((error) => Effect.logDebug(`could not read the consumer groups' committed offsets: ${error}`))
  )
