/**
 * Consumer-group bookkeeping of the in-memory broker: group membership, the metadata refresh
 * delay, the coordinator's load time, partition assignment and where a member starts reading.
 * Plain functions over the shared engine, so every port sees the same groups.
 *
 * @internal
 */
import { type BrokerEngine, type Group, type Member, tp } from "./brokerEngine.ts"

/** The group named `groupId`, created (refreshed at `now`) on first use. */
export const groupOf = (engine: BrokerEngine, groupId: string, now = 0): Group => {
  let group = engine.groups.get(groupId)
  if (group === undefined) {
    group = { committed: new Map(), members: [], known: new Map(), refreshedAt: now }
    engine.groups.set(groupId, group)
  }
  return group
}

/**
 * The partition count of `topic` as the group knows it. With a metadata refresh delay, a
 * partition added after the group's last refresh is not assigned to anyone until the next one
 * (kafkajs: `metadataMaxAge`, 5 minutes by default).
 */
const knownPartitions = (engine: BrokerEngine, group: Group, topic: string, actual: number): number => {
  if (engine.metadataMaxAgeMillis === undefined) return actual
  const known = group.known.get(topic)
  if (known === undefined) {
    group.known.set(topic, actual)
    return actual
  }
  return Math.min(known, actual)
}

/** Forgets the partition counts the group had read, when its metadata is older than the max age. */
export const refreshMetadataIfStale = (engine: BrokerEngine, group: Group, now: number): void => {
  const maxAge = engine.metadataMaxAgeMillis
  if (maxAge === undefined || now - group.refreshedAt < maxAge) return
  group.known.clear()
  group.refreshedAt = now
}

/** Millis until the group's next metadata refresh, when it would reveal partitions. */
export const untilRefresh = (engine: BrokerEngine, member: Member, now: number): number | undefined => {
  const maxAge = engine.metadataMaxAgeMillis
  if (maxAge === undefined) return undefined
  const group = groupOf(engine, member.groupId)
  const hidden = member.topics.some((topic) => {
    const actual = engine.topics.get(topic)?.length ?? 0
    return knownPartitions(engine, group, topic, actual) < actual
  })
  return hidden ? Math.max(0, group.refreshedAt + maxAge - now) : undefined
}

/** Millis until the group coordinator is ready (0 when it is); the first group call starts it. */
export const coordinatorWait = (engine: BrokerEngine, now: number): number => {
  if (engine.coordinatorLoadMillis === undefined) return 0
  engine.coordinatorReadyAt ??= now + engine.coordinatorLoadMillis
  return Math.max(0, engine.coordinatorReadyAt - now)
}

/**
 * The partitions a member owns now: per topic, partition `p` goes to the `p mod n`-th live
 * member subscribed to it, in join order. Recomputed on every fetch, so joins, leaves and
 * partition growth rebalance at once.
 */
export const assignment = (engine: BrokerEngine, member: Member): Array<{ topic: string; partition: number }> => {
  const group = groupOf(engine, member.groupId)
  const owned: Array<{ topic: string; partition: number }> = []
  for (const topic of member.topics) {
    const logs = engine.topics.get(topic)
    if (logs === undefined) continue
    const subscribers = group.members.filter((m) => m.topics.includes(topic))
    const index = subscribers.indexOf(member)
    const count = knownPartitions(engine, group, topic, logs.length)
    for (let partition = 0; partition < count; partition++) {
      if (partition % subscribers.length === index) owned.push({ topic, partition })
    }
  }
  return owned
}

/**
 * Positions start at the group's committed offset, else the beginning or the end. Each newly
 * owned partition gets a fresh number from `newAssignment`, so a batch fetched under an older
 * assignment is known to be stale.
 */
export const syncPositions = (
  engine: BrokerEngine,
  member: Member,
  owned: ReadonlyArray<{ topic: string; partition: number }>,
  newAssignment: () => number
): void => {
  const group = groupOf(engine, member.groupId)
  const keys = new Set(owned.map((o) => tp(o.topic, o.partition)))
  for (const key of member.positions.keys()) if (!keys.has(key)) member.positions.delete(key)
  for (const key of member.assignments.keys()) if (!member.positions.has(key)) member.assignments.delete(key)
  for (const { partition, topic } of owned) {
    const key = tp(topic, partition)
    if (member.positions.has(key)) continue
    const committed = group.committed.get(key)
    const end = engine.topics.get(topic)![partition]!.length
    member.positions.set(key, committed ?? (member.fromBeginning ? 0 : end))
    member.assignments.set(key, newAssignment())
  }
}
