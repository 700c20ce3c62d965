/**
 * What operators did with dead letters: one letter looked up by its place on the dead-letter
 * topic, the audited discard (a letter marked handled without a replay), and the history of
 * replays and discards.
 *
 * A dead-letter topic is append-only, so what happened to its letters is recorded beside it, on
 * its audit topic `<dead-letter topic>.audit` (one partition, kept without time limit, made on
 * first use): one JSON record per handled letter, with the action, the letter's partition and
 * offset, who, when and why. The audit topic lives with the letters (same cluster, read by every
 * dashboard and CLI that reaches the broker) and needs no table. Markers are not written on the
 * dead-letter topic itself: a record appended there after a letter still waiting would count in
 * its depth. A handled letter (replayed or discarded) also moves the replay position that
 * `DeadLetterDepth` counts from: the audit topic's letters are handled, so the position passes
 * over them once the letters before them are handled too, and the depth counts a discarded letter
 * as done.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { replay } from "./DeadLetters.ts"
import { OperatorError } from "./OperatorError.ts"

/**
 * The audit topic of `deadLetterTopic`: `<deadLetterTopic>.audit`.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const auditTopic = (deadLetterTopic: string): string => `${deadLetterTopic}.audit`

/**
 * One handled dead letter, as recorded on the audit topic.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handling {
  readonly action: "replay" | "discard"
  readonly deadLetterTopic: string
  /** The letter's place on the dead-letter topic. */
  readonly partition: number
  readonly offset: string
  readonly eventId: string | null
  readonly errorClass: string
  readonly operator: string
  readonly reason: string
  /** Epoch milliseconds. */
  readonly at: number
}

/**
 * A letter's place on its dead-letter topic, written `partition/offset` in forms and addresses.
 *
 * @since 0.1.0
 * @category models
 */
export interface Place {
  readonly partition: number
  readonly offset: string
}

/**
 * Reads `"3/1024"` as a place; a typed error for anything else.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const parsePlace = (text: string): Effect.Effect<Place, OperatorError> => {
  const match = /^(\d{1,6})\/(\d{1,20})$/.exec(text.trim())
  return match === null
    ? Effect.fail(new OperatorError({ reason: `"${text}" is not a dead letter's place (partition/offset, e.g. 0/42)` }))
    : Effect.succeed({ partition: Number(match[1]), offset: String(BigInt(match[2]!)) })
}

/**
 * The dead letters at `places` on `topic`. The topic is read as a stream that holds only the
 * found letters and stops once every wanted partition has reached its last wanted offset (each
 * partition arrives in offset order), so a place past a partition's end reads that partition only.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const deadLettersAt = (topic: string, places: ReadonlyArray<Place>) =>
  Effect.gen(function* () {
    const wanted = new Set(places.map(placeKey))
    if (wanted.size === 0) return []
    const last = new Map<number, bigint>()
    for (const p of places) {
      const offset = BigInt(p.offset)
      if ((last.get(p.partition) ?? -1n) < offset) last.set(p.partition, offset)
    }
    const reader = yield* TopicReader
    const found = yield* reader.read(topic).pipe(
      Stream.takeWhile(() => last.size > 0),
      Stream.tap((record) =>
        Effect.sync(() => {
          const until = last.get(record.partition)
          if (until !== undefined && BigInt(record.offset) >= until) last.delete(record.partition)
        })
      ),
      Stream.filter((record) => wanted.has(placeKey(record))),
      Stream.runCollect
    )
    return found.flatMap((record) => Option.toArray(DeadLetter.parse(record)))
  })

const decoder = new TextDecoder()

const decode = (value: Uint8Array): Handling | undefined => {
  try {
    const parsed = JSON.parse(decoder.decode(value)) as Partial<Handling>
    return parsed.action === "replay" || parsed.action === "discard" ? (parsed as Handling) : undefined
  } catch {
    return undefined
  }
}

/**
 * Appends `handlings` to the audit topic of `deadLetterTopic` (made on first use).
 *
 * @since 0.1.0
 * @category dead letters
 */
export const recordHandlings = (deadLetterTopic: string, handlings: ReadonlyArray<Handling>) =>
  Effect.gen(function* () {
    if (handlings.length === 0) return
    const topic = auditTopic(deadLetterTopic)
    // Kept until deleted: an audit that expires with the broker's default retention tells nothing.
    yield* BrokerAdmin.use((admin) => admin.ensureTopic({ topic, partitions: 1, configs: { "retention.ms": "-1" } }))
    const requests = yield* Effect.forEach(handlings, (h) =>
      Effect.map(makeEventId, (id) => ({
        id,
        topic,
        key: h.eventId,
        partition: 0,
        headers: {},
        payload: new TextEncoder().encode(JSON.stringify(h)),
        writeEventId: false
      }))
    )
    const outcomes = yield* Publisher.use((p) => p.publish(requests))
    const refused = outcomes.find((o) => o._tag !== "Success")
    if (refused !== undefined) {
      return yield* new OperatorError({
        reason: `the audit topic ${topic} refused the record: ${refused._tag === "Failure" ? refused.failure.message : "?"}`
      })
    }
  })

const handlingsOf = (deadLetterTopic: string) =>
  Effect.gen(function* () {
    const exists = yield* BrokerAdmin.use((admin) => admin.partitionCount(auditTopic(deadLetterTopic)))
    if (Option.isNone(exists)) return Stream.empty
    const reader = yield* TopicReader
    return reader.read(auditTopic(deadLetterTopic)).pipe(
      Stream.filterMap((record) => {
        const handling = decode(record.value)
        return handling === undefined ? Result.fail(record) : Result.succeed(handling)
      })
    )
  })

/**
 * The latest `limit` handlings of `deadLetterTopic`'s letters, newest first. The audit topic is
 * read as a stream; only the latest `limit` are held.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const deadLetterHistory = (deadLetterTopic: string, options: { readonly limit: number }) =>
  Effect.gen(function* () {
    const handlings = yield* handlingsOf(deadLetterTopic)
    const latest = yield* Stream.runFold(
      handlings,
      (): Array<Handling> => [],
      (kept, h) => {
        kept.push(h)
        if (kept.length > options.limit) kept.shift()
        return kept
      }
    )
    return latest.reverse()
  })

/**
 * What was done with the letters at `places`: each place's handlings, oldest first. The audit
 * topic is read as a stream; only the handlings of these places are held.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const handlingsAt = (deadLetterTopic: string, places: ReadonlyArray<Place>) =>
  Effect.gen(function* () {
    const wanted = new Set(places.map(placeKey))
    const byPlace = new Map<string, Array<Handling>>()
    if (wanted.size === 0) return byPlace
    const handlings = yield* handlingsOf(deadLetterTopic)
    yield* Stream.runForEach(handlings, (h) =>
      Effect.sync(() => {
        const key = placeKey(h)
        if (wanted.has(key)) byPlace.set(key, [...(byPlace.get(key) ?? []), h])
      })
    )
    return byPlace
  })

/**
 * The key {@link handlingsAt} files a place under.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const placeKey = (p: Place): string => `${p.partition}/${BigInt(p.offset)}`

/**
 * Moves the replay position of `deadLetterTopic` over every letter its audit topic records as
 * handled (replayed or discarded), as far as the letters before them are handled too.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const settleDeadLetterDepth = (deadLetterTopic: string) =>
  Effect.gen(function* () {
    const handlings = yield* handlingsOf(deadLetterTopic)
    const places = yield* Stream.runFold(
      handlings,
      () => new Map<string, Place>(),
      (all, h) => all.set(placeKey(h), { partition: h.partition, offset: h.offset })
    )
    yield* DeadLetterDepth.advance(
      deadLetterTopic,
      [...places.values()],
      (record) => record.headers[DeadLetter.headers.originalTopic] !== undefined
    )
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface DiscardReport {
  readonly dryRun: boolean
  readonly selected: ReadonlyArray<DeadLetter.DeadLetter>
  /** Places asked for that hold no dead letter. */
  readonly missing: ReadonlyArray<Place>
}

/**
 * Marks the dead letters at `places` as handled without replaying them: a dry run unless
 * `execute`; executed, each is recorded on the audit topic (who, when, why) and the dead-letter
 * depth stops counting it. A place that holds no dead letter is reported in `missing`; with
 * `strict` it fails the request instead, before anything is recorded.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const discardDeadLetters = (request: {
  readonly from: string
  readonly places: ReadonlyArray<Place>
  readonly operator: string
  readonly reason: string
  readonly execute: boolean
  readonly strict?: boolean | undefined
}) =>
  Effect.gen(function* () {
    if (request.from.trim() === "") return yield* new OperatorError({ reason: "name the dead-letter topic" })
    if (request.places.length === 0) return yield* new OperatorError({ reason: "select dead letters to discard" })
    if (request.execute && (request.operator.trim() === "" || request.reason.trim() === "")) {
      return yield* new OperatorError({ reason: "name the operator and the reason: a discard is audited" })
    }
    const selected = yield* deadLettersAt(request.from, request.places)
    const found = new Set(selected.map((l) => placeKey(l.record)))
    const missing = request.places.filter((p) => !found.has(placeKey(p)))
    if (request.strict === true && missing.length > 0) {
      return yield* new OperatorError({
        reason: `no dead letter at ${missing.map(placeKey).join(", ")} on ${request.from} (see: effect-outbox dlt list ${request.from}); nothing discarded`
      })
    }
    if (request.execute && selected.length > 0) {
      yield* recordHandlings(
        request.from,
        yield* handlingsFor(request.from, "discard", selected, request.operator, request.reason)
      )
      yield* settleDeadLetterDepth(request.from)
    }
    return { dryRun: !request.execute, selected, missing } satisfies DiscardReport
  })

/**
 * The audit records for `letters` handled by `operator` now.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const handlingsFor = (
  deadLetterTopic: string,
  action: Handling["action"],
  letters: ReadonlyArray<DeadLetter.DeadLetter>,
  operator: string,
  reason: string
) =>
  Effect.map(Clock.currentTimeMillis, (at) =>
    letters.map(
      (l): Handling => ({
        action,
        deadLetterTopic,
        partition: l.record.partition,
        offset: l.record.offset,
        eventId: l.eventId,
        errorClass: l.errorClass,
        operator,
        reason,
        at
      })
    )
  )

/**
 * `replay`, and once executed, each replayed letter recorded on the audit topic (who, when, why)
 * and the dead-letter depth moved past it: what the dashboard and `dlt replay` run, so the
 * history shows every replay whoever made it.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const replayAudited = (
  request: Parameters<typeof replay>[0] & { readonly operator: string; readonly reason: string }
) =>
  Effect.gen(function* () {
    const report = yield* replay(request)
    const replayed = report.result?.replayed ?? []
    if (replayed.length > 0) {
      yield* recordHandlings(
        request.from,
        yield* handlingsFor(request.from, "replay", replayed, request.operator, request.reason)
      )
      yield* settleDeadLetterDepth(request.from)
    }
    return report
  })
