/**
 * `ConsumerSource` over the in-memory broker: consumer groups with committed offsets, partitions
 * split among live members, positions that start at the committed offset (so an uncommitted
 * record is redelivered to the next member), and waits on the change signal instead of sleeps.
 *
 * @internal
 */
import type {
  ConsumerBatch,
  ConsumerRecord,
  ConsumerSource,
  OffsetCommit,
  Subscription,
  TopicPartition
} from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { type BrokerEngine, type Group, type Member, toConsumerRecord, tp } from "./brokerEngine.ts"
import * as Outage from "./brokerOutage.ts"

export const make = (engine: BrokerEngine, maxBatchSize: number): ConsumerSource["Service"] => {
  const { groups, notify, operationFault, topics } = engine
  let nextMemberId = 1
  let nextAssignment = 1

  const groupOf = (groupId: string, now = 0): Group => {
    let group = groups.get(groupId)
    if (group === undefined) {
      group = { committed: new Map(), members: [], known: new Map(), refreshedAt: now }
      groups.set(groupId, group)
    }
    return group
  }

  /**
   * The partition count of `topic` as the group knows it. With a metadata refresh delay, a
   * partition added after the group's last refresh is not assigned to anyone until the next one
   * (kafkajs: `metadataMaxAge`, 5 minutes by default).
   */
  const knownPartitions = (group: Group, topic: string, actual: number): number => {
    if (engine.metadataMaxAgeMillis === undefined) return actual
    const known = group.known.get(topic)
    if (known === undefined) {
      group.known.set(topic, actual)
      return actual
    }
    return Math.min(known, actual)
  }

  const refreshMetadata = (group: Group, now: number) => {
    group.known.clear()
    group.refreshedAt = now
  }

  /** Millis until the group's next metadata refresh, when it would reveal partitions. */
  const untilRefresh = (member: Member, now: number): number | undefined => {
    const maxAge = engine.metadataMaxAgeMillis
    if (maxAge === undefined) return undefined
    const group = groupOf(member.groupId)
    const hidden = member.topics.some((topic) => {
      const actual = topics.get(topic)?.length ?? 0
      return knownPartitions(group, topic, actual) < actual
    })
    return hidden ? Math.max(0, group.refreshedAt + maxAge - now) : undefined
  }

  /** Millis until the group coordinator is ready (0 when it is); the first group call starts it. */
  const coordinatorWait = (now: number): number => {
    if (engine.coordinatorLoadMillis === undefined) return 0
    engine.coordinatorReadyAt ??= now + engine.coordinatorLoadMillis
    return Math.max(0, engine.coordinatorReadyAt - now)
  }

  /**
   * The partitions a member owns now: per topic, partition `p` goes to the `p mod n`-th live
   * member subscribed to it, in join order. Recomputed on every fetch, so joins, leaves and
   * partition growth rebalance at once.
   */
  const assignment = (member: Member): Array<{ topic: string; partition: number }> => {
    const group = groupOf(member.groupId)
    const owned: Array<{ topic: string; partition: number }> = []
    for (const topic of member.topics) {
      const logs = topics.get(topic)
      if (logs === undefined) continue
      const subscribers = group.members.filter((m) => m.topics.includes(topic))
      const index = subscribers.indexOf(member)
      const count = knownPartitions(group, topic, logs.length)
      for (let partition = 0; partition < count; partition++) {
        if (partition % subscribers.length === index) owned.push({ topic, partition })
      }
    }
    return owned
  }

  /** Positions start at the group's committed offset, else the beginning or the end. */
  const syncPositions = (member: Member, owned: ReadonlyArray<{ topic: string; partition: number }>) => {
    const group = groupOf(member.groupId)
    const keys = new Set(owned.map((o) => tp(o.topic, o.partition)))
    for (const key of member.positions.keys()) if (!keys.has(key)) member.positions.delete(key)
    for (const key of member.assignments.keys()) if (!member.positions.has(key)) member.assignments.delete(key)
    for (const { partition, topic } of owned) {
      const key = tp(topic, partition)
      if (member.positions.has(key)) continue
      const committed = group.committed.get(key)
      const end = topics.get(topic)![partition]!.length
      member.positions.set(key, committed ?? (member.fromBeginning ? 0 : end))
      member.assignments.set(key, nextAssignment++)
    }
  }

  const nextBatch = (member: Member): ConsumerBatch | undefined => {
    const owned = assignment(member)
    syncPositions(member, owned)
    for (let i = 0; i < owned.length; i++) {
      const index = (member.cursor + i) % owned.length
      const { partition, topic } = owned[index]!
      const key = tp(topic, partition)
      const position = member.positions.get(key)!
      const log = topics.get(topic)![partition]!
      if (position >= log.length || member.paused.has(key)) continue
      const upTo = Math.min(log.length, position + maxBatchSize)
      const records: Array<ConsumerRecord> = []
      for (let offset = position; offset < upTo; offset++) {
        records.push(toConsumerRecord(topic, partition, offset, log[offset]!))
      }
      member.positions.set(key, upTo)
      member.cursor = index + 1
      return { topic, partition, records }
    }
    return undefined
  }

  return {
    subscribe: (options) =>
      Effect.gen(function* () {
        yield* Outage.gate(
          engine,
          (reason) => new ConsumerSourceError({ operation: "subscribe", reason, retriable: true })
        )
        const joinedAt = yield* Clock.currentTimeMillis
        coordinatorWait(joinedAt)
        const member = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const member: Member = {
              id: nextMemberId++,
              groupId: options.groupId,
              topics: [...new Set(options.topics)].sort(),
              fromBeginning: options.fromBeginning ?? true,
              positions: new Map(),
              assignments: new Map(),
              paused: new Set(),
              cursor: 0,
              closed: false
            }
            const group = groupOf(options.groupId, joinedAt)
            group.members.push(member)
            // Positions are fixed when the member joins, as Kafka resolves them on assignment.
            syncPositions(member, assignment(member))
            notify()
            return member
          }),
          (member) =>
            Effect.sync(() => {
              member.closed = true
              const group = groupOf(member.groupId)
              group.members.splice(group.members.indexOf(member), 1)
              notify()
            })
        )
        const pull: Effect.Effect<readonly [ConsumerBatch], Cause.Done | ConsumerSourceError> = Effect.gen(
          function* () {
            while (true) {
              if (member.closed) return yield* Cause.done()
              if (operationFault("poll")) {
                return yield* new ConsumerSourceError({
                  operation: "poll",
                  reason: "injected poll fault",
                  retriable: true
                })
              }
              // A broker that is down delivers nothing; a coordinator still loading neither.
              yield* Outage.waitUp(engine)
              const now = yield* Clock.currentTimeMillis
              const loading = coordinatorWait(now)
              if (loading > 0) {
                yield* Effect.sleep(Duration.millis(loading))
                continue
              }
              const group = groupOf(member.groupId)
              const maxAge = engine.metadataMaxAgeMillis
              if (maxAge !== undefined && now - group.refreshedAt >= maxAge) refreshMetadata(group, now)
              const waitFor = engine.signal()
              const batch = nextBatch(member)
              if (batch !== undefined) return [batch] as const
              const refreshIn = untilRefresh(member, now)
              yield* refreshIn === undefined
                ? Deferred.await(waitFor)
                : Effect.raceFirst(Deferred.await(waitFor), Effect.sleep(Duration.millis(refreshIn)))
            }
          }
        )
        const commitNow = (offsets: ReadonlyArray<OffsetCommit>) =>
          Effect.suspend(() => {
            if (member.closed) {
              return Effect.fail(
                new ConsumerSourceError({
                  operation: "commit",
                  reason: "the subscription was closed; its uncommitted records go to the next member",
                  retriable: false
                })
              )
            }
            const group = groupOf(member.groupId)
            for (const commit of offsets) {
              const offset = Number(commit.offset)
              if (!Number.isSafeInteger(offset) || offset < 0) {
                return Effect.fail(
                  new ConsumerSourceError({
                    operation: "commit",
                    reason: `offset ${commit.offset} of ${commit.topic}/${commit.partition} is not a valid offset`,
                    retriable: false
                  })
                )
              }
            }
            // As the Kafka adapter does: a commit of a partition this member no longer owns (a
            // rebalance moved it) is dropped; its new owner commits it. A topic-less member
            // commits for a transactional producer (Kafka's TxnOffsetCommit, which no assignment
            // restricts): its commits always apply.
            const owned = new Set(assignment(member).map((o) => tp(o.topic, o.partition)))
            for (const commit of offsets) {
              const key = tp(commit.topic, commit.partition)
              if (member.topics.length === 0 || owned.has(key)) group.committed.set(key, Number(commit.offset))
            }
            return Effect.void
          })
        // Each delivered batch remembers the assignment it was fetched under (M3).
        const fetchedUnder = new WeakMap<ConsumerBatch, number>()
        const isCurrent = (batch: ConsumerBatch): boolean => {
          const under = fetchedUnder.get(batch)
          if (under === undefined) return true
          if (member.closed) return false
          const key = tp(batch.topic, batch.partition)
          const owned = assignment(member).some((o) => o.topic === batch.topic && o.partition === batch.partition)
          return owned && member.positions.has(key) && member.assignments.get(key) === under
        }
        const setPaused = (partitions: ReadonlyArray<TopicPartition>, paused: boolean) =>
          Effect.sync(() => {
            for (const { partition, topic } of partitions) {
              if (paused) member.paused.add(tp(topic, partition))
              else member.paused.delete(tp(topic, partition))
            }
            if (!paused) notify()
          })
        const subscription: Subscription = {
          batches: Stream.fromPull(
            Effect.succeed(
              Effect.tap(pull, ([batch]) =>
                Effect.sync(() => {
                  fetchedUnder.set(batch, member.assignments.get(tp(batch.topic, batch.partition)) ?? 0)
                })
              )
            )
          ),
          isCurrent,
          pause: (partitions) => setPaused(partitions, true),
          resume: (partitions) => setPaused(partitions, false),
          commit: (offsets) =>
            Effect.gen(function* () {
              if (operationFault("commit")) {
                return yield* new ConsumerSourceError({
                  operation: "commit",
                  reason: "injected commit fault",
                  retriable: true
                })
              }
              yield* Outage.gate(
                engine,
                (reason) => new ConsumerSourceError({ operation: "commit", reason, retriable: true })
              )
              if (coordinatorWait(yield* Clock.currentTimeMillis) > 0) {
                return yield* new ConsumerSourceError({
                  operation: "commit",
                  reason: "the group coordinator is not available yet (COORDINATOR_LOAD_IN_PROGRESS)",
                  retriable: true
                })
              }
              return yield* commitNow(offsets)
            })
        }
        return subscription
      })
  }
}
