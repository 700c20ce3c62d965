/**
 * One member's `Subscription` over the in-memory broker: the poll loop that waits on the change
 * signal instead of sleeping, offset commits, pause/resume, and the staleness check of delivered
 * batches.
 *
 * @internal
 */
import type {
  ConsumerBatch,
  ConsumerRecord,
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
import { type BrokerEngine, type Member, memberIdOf, toConsumerRecord, tp } from "./brokerEngine.ts"
import {
  assignment,
  coordinatorWait,
  groupOf,
  refreshMetadataIfStale,
  syncPositions,
  untilRefresh
} from "./brokerGroups.ts"
import * as Outage from "./brokerOutage.ts"

/** What the subscriptions of one consumer source share: the broker, batch size, and numbering. */
export interface Source {
  readonly engine: BrokerEngine
  readonly maxBatchSize: number
  /** A new member id (each consumer source counts its own). */
  readonly newMemberId: () => number
  /** A new assignment number, to tell a batch's assignment from a later one. */
  readonly newAssignment: () => number
}

/** The next batch of the member's owned partitions, taken in turn; `undefined` if none has records. */
const nextBatch = (source: Source, member: Member): ConsumerBatch | undefined => {
  const { engine, maxBatchSize } = source
  const owned = assignment(engine, member)
  syncPositions(engine, member, owned, source.newAssignment)
  for (let i = 0; i < owned.length; i++) {
    const index = (member.cursor + i) % owned.length
    const { partition, topic } = owned[index]!
    const key = tp(topic, partition)
    const position = member.positions.get(key)!
    const log = engine.topics.get(topic)![partition]!
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

/** Waits for the next batch; ends (`Cause.done`) once the member has left its group. */
const pull = (
  source: Source,
  member: Member
): Effect.Effect<readonly [ConsumerBatch], Cause.Done | ConsumerSourceError> =>
  Effect.gen(function* () {
    const { engine } = source
    while (true) {
      if (member.closed) return yield* Cause.done()
      if (engine.operationFault("poll")) {
        return yield* new ConsumerSourceError({ operation: "poll", reason: "injected poll fault", retriable: true })
      }
      // A broker that is down delivers nothing; a coordinator still loading neither.
      yield* Outage.waitUp(engine)
      const now = yield* Clock.currentTimeMillis
      const loading = coordinatorWait(engine, now)
      if (loading > 0) {
        yield* Effect.sleep(Duration.millis(loading))
        continue
      }
      refreshMetadataIfStale(engine, groupOf(engine, member.groupId), now)
      // Taken before the fetch, so a change made after it wakes the wait below.
      const waitFor = engine.signal()
      const batch = nextBatch(source, member)
      if (batch !== undefined) return [batch] as const
      const refreshIn = untilRefresh(engine, member, now)
      yield* refreshIn === undefined
        ? Deferred.await(waitFor)
        : Effect.raceFirst(Deferred.await(waitFor), Effect.sleep(Duration.millis(refreshIn)))
    }
  })

const commitRefused = (reason: string, retriable: boolean) =>
  new ConsumerSourceError({ operation: "commit", reason, retriable })

/** Applies a commit the broker accepted: checked offsets, only for partitions still owned. */
const commitNow = (engine: BrokerEngine, member: Member, offsets: ReadonlyArray<OffsetCommit>) =>
  Effect.suspend(() => {
    if (member.closed) {
      return Effect.fail(
        commitRefused("the subscription was closed; its uncommitted records go to the next member", false)
      )
    }
    const group = groupOf(engine, member.groupId)
    for (const commit of offsets) {
      const offset = Number(commit.offset)
      if (!Number.isSafeInteger(offset) || offset < 0) {
        return Effect.fail(
          commitRefused(`offset ${commit.offset} of ${commit.topic}/${commit.partition} is not a valid offset`, false)
        )
      }
    }
    // As the Kafka adapter does: a commit of a partition this member no longer owns (a
    // rebalance moved it) is dropped; its new owner commits it. A topic-less member
    // commits for a transactional producer (Kafka's TxnOffsetCommit, which no assignment
    // restricts): its commits always apply.
    const owned = new Set(assignment(engine, member).map((o) => tp(o.topic, o.partition)))
    for (const commit of offsets) {
      const key = tp(commit.topic, commit.partition)
      if (member.topics.length === 0 || owned.has(key)) group.committed.set(key, Number(commit.offset))
    }
    return Effect.void
  })

/** Records the offsets in the group, once the broker and its coordinator can take them. */
const commit = (source: Source, member: Member, offsets: ReadonlyArray<OffsetCommit>) =>
  Effect.gen(function* () {
    const { engine } = source
    if (engine.operationFault("commit")) return yield* commitRefused("injected commit fault", true)
    yield* Outage.gate(engine, (reason) => commitRefused(reason, true))
    if (coordinatorWait(engine, yield* Clock.currentTimeMillis) > 0) {
      return yield* commitRefused("the group coordinator is not available yet (COORDINATOR_LOAD_IN_PROGRESS)", true)
    }
    return yield* commitNow(engine, member, offsets)
  })

const setPaused = (engine: BrokerEngine, member: Member, partitions: ReadonlyArray<TopicPartition>, paused: boolean) =>
  Effect.sync(() => {
    for (const { partition, topic } of partitions) {
      if (paused) member.paused.add(tp(topic, partition))
      else member.paused.delete(tp(topic, partition))
    }
    // A resumed partition may have records a waiting poll should see.
    if (!paused) engine.notify()
  })

/** The subscription of a member that has joined its group. */
export const make = (source: Source, member: Member): Subscription => {
  const { engine } = source
  // Each delivered batch remembers the assignment it was fetched under.
  const fetchedUnder = new WeakMap<ConsumerBatch, number>()
  const isCurrent = (batch: ConsumerBatch): boolean => {
    const under = fetchedUnder.get(batch)
    if (under === undefined) return true
    if (member.closed) return false
    const key = tp(batch.topic, batch.partition)
    const owned = assignment(engine, member).some((o) => o.topic === batch.topic && o.partition === batch.partition)
    return owned && member.positions.has(key) && member.assignments.get(key) === under
  }
  const remembered = Effect.tap(pull(source, member), ([batch]) =>
    Effect.sync(() => {
      fetchedUnder.set(batch, member.assignments.get(tp(batch.topic, batch.partition)) ?? 0)
    })
  )
  return {
    batches: Stream.fromPull(Effect.succeed(remembered)),
    isCurrent,
    // The assignment number stands in for the generation: a new one each time the partition is assigned.
    groupMetadata: (batch) => {
      const under = fetchedUnder.get(batch)
      return under === undefined ? undefined : { generationId: under, memberId: memberIdOf(member) }
    },
    pause: (partitions) => setPaused(engine, member, partitions, true),
    resume: (partitions) => setPaused(engine, member, partitions, false),
    commit: (offsets) => commit(source, member, offsets)
  }
}
