/**
 * The live progress display: one line rewritten in place on a terminal, a line per interval
 * otherwise (CI logs, pipes), so the same demo reads well in both.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"

/**
 * One sample of the pipeline.
 *
 * - `enqueued`: events committed to the outbox (rolled-back ones excluded);
 * - `published`: events the broker confirmed (their row is `PUBLISHED` or beyond);
 * - `processed`: events whose effect committed (`SUCCESS`);
 * - `deadLettered`: events dead-lettered by the consumer (`PUSHED_FAILURE`);
 * - `unfinished`: committed events not yet finished by the consumer (the pipeline's lag, in events);
 * - `consumerLag`: records on the topic the consumer group has not committed yet (its Kafka lag,
 *   `outbox_consumer_lag`, read from the broker); `undefined` until the first reading.
 *
 * @since 0.1.0
 * @category models
 */
export interface Snapshot {
  readonly enqueued: number
  readonly rolledBack: number
  readonly published: number
  readonly processed: number
  readonly deadLettered: number
  readonly unfinished: number
  readonly consumerLag: number | undefined
  readonly elapsedMillis: number
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const render = (snapshot: Snapshot, target?: number): string => {
  const seconds = (snapshot.elapsedMillis / 1000).toFixed(1).padStart(5)
  const of = target === undefined ? "" : ` of ${target}`
  return (
    `[${seconds}s] enqueued ${snapshot.enqueued} (+${snapshot.rolledBack} rolled back)${of}` +
    ` | published ${snapshot.published}` +
    ` | processed ${snapshot.processed}` +
    ` | dead-lettered ${snapshot.deadLettered}` +
    ` | unfinished ${snapshot.unfinished}` +
    ` | consumer lag ${snapshot.consumerLag ?? "?"}`
  )
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly sample: Effect.Effect<Snapshot>
  /** Where lines go (default: standard output). */
  readonly write?: (text: string) => void
  /** Rewrite one line in place (default: whether standard output is a terminal). */
  readonly tty?: boolean
  /** Time between samples (default 200 ms on a terminal, 1 s otherwise). */
  readonly interval?: Duration.Input
  /** The number of events the run will enqueue, shown as `n/target`. */
  readonly target?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Display {
  /** Prints a line above the progress line (log output), keeping the display intact. */
  readonly print: (line: string) => void
  /** Stops sampling and prints the final sample on its own line. */
  readonly finish: Effect.Effect<Snapshot>
}

/**
 * Starts sampling in the current scope. Non-terminal output prints only samples that changed,
 * so an idle pipeline does not flood a log.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: Options): Effect.Effect<Display, never, Scope.Scope> =>
  Effect.gen(function* () {
    const write = options.write ?? ((text: string) => void process.stdout.write(text))
    const tty = options.tty ?? process.stdout.isTTY === true
    const interval = options.interval ?? (tty ? Duration.millis(200) : Duration.seconds(1))
    let last = ""
    const show = (snapshot: Snapshot) =>
      Effect.sync(() => {
        const line = render(snapshot, options.target)
        if (tty) write(`\r\x1b[2K${line}`)
        else if (stripTime(line) !== stripTime(last)) write(`${line}\n`)
        last = line
      })
    const fiber = yield* options.sample.pipe(
      Effect.flatMap(show),
      Effect.andThen(Effect.sleep(interval)),
      Effect.forever,
      Effect.forkScoped
    )
    return {
      print: (line) => {
        if (tty) write(`\r\x1b[2K${line}\n${last}`)
        else write(`${line}\n`)
      },
      finish: Effect.gen(function* () {
        yield* Fiber.interrupt(fiber)
        const snapshot = yield* options.sample
        const line = render(snapshot, options.target)
        write(tty ? `\r\x1b[2K${line}\n` : `${line}\n`)
        return snapshot
      })
    }
  })

const stripTime = (line: string) => line.replace(/^\[[^\]]*\]/, "")
