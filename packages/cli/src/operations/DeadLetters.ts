/**
 * `dlt`: the dead letters of a dead-letter topic, and their replay through core's `DeadLetter`.
 *
 * @since 0.1.0
 */
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { OperatorError } from "./OperatorError.ts"

/**
 * The dead letters of a dead-letter topic, oldest first per partition. The topic is read as a
 * stream and only the kept letters are held: `skip` passes over the first matching letters,
 * `limit` stops the read once that many are kept, `filter` keeps only matching ones. Without a
 * limit every matching letter is kept.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const deadLetters = (
  topic: string,
  options: {
    readonly limit?: number | undefined
    readonly skip?: number | undefined
    readonly filter?: ((letter: DeadLetter.DeadLetter) => boolean) | undefined
  } = {}
): Effect.Effect<ReadonlyArray<DeadLetter.DeadLetter>, ConsumerSourceError, TopicReader> =>
  TopicReader.use((reader) => {
    const filter = options.filter ?? (() => true)
    const letters = reader.read(topic).pipe(
      Stream.filterMap((record) => {
        const letter = Option.getOrUndefined(DeadLetter.parse(record))
        return letter !== undefined && filter(letter) ? Result.succeed(letter) : Result.fail(record)
      }),
      Stream.drop(options.skip ?? 0)
    )
    return Stream.runCollect(options.limit === undefined ? letters : Stream.take(letters, options.limit))
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface ReplayReport {
  readonly dryRun: boolean
  readonly selected: ReadonlyArray<DeadLetter.DeadLetter>
  readonly result: DeadLetter.ReplayResult | null
}

/**
 * Republishes the selected dead letters of `from` to their original topic (or `to`) through
 * `DeadLetter.replay`. `eventIds` selects by event id; none selects all, which needs `all`.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const replay = (request: {
  readonly from: string
  readonly eventIds: ReadonlyArray<string>
  readonly all: boolean
  readonly to?: string | undefined
  readonly execute: boolean
}) =>
  Effect.gen(function* () {
    if (request.eventIds.length === 0 && !request.all) {
      return yield* new OperatorError({ reason: "name the dead letters: --event-id (repeatable), or --all" })
    }
    const wanted = new Set(request.eventIds.map((id) => id.trim().toLowerCase()))
    const filter = (letter: DeadLetter.DeadLetter) =>
      wanted.size === 0 || (letter.eventId !== null && wanted.has(letter.eventId.toLowerCase()))
    const selected = yield* deadLetters(request.from, { filter })
    if (!request.execute || selected.length === 0) {
      return { dryRun: !request.execute, selected, result: null } satisfies ReplayReport
    }
    const result = yield* DeadLetter.replay({
      from: request.from,
      filter,
      ...(request.to === undefined ? {} : { to: request.to })
    })
    return { dryRun: false, selected, result } satisfies ReplayReport
  })
