/**
 * `log republish`: sends a range of the event table to the broker again — a backfill by time
 * window, topic or key. Duplicates on purpose: consumers dedupe by event id (the Inbox does).
 *
 * @since 0.1.0
 */
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import type * as LogRecord from "@effect-outbox/core/LogRecord"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Console from "effect/Console"
import { Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Operations from "../Operations.ts"
import { database, type RootConfig, reachableBroker, root, selectionFlags, userError } from "./Root.ts"

/**
 * What `log republish` selected and, with `execute`, sent.
 *
 * @since 0.1.0
 * @category models
 */
export interface RepublishReport {
  readonly dryRun: boolean
  readonly from: string
  readonly to: string
  readonly topic: string | null
  readonly key: string | null
  /** Selected events per topic. */
  readonly topics: Readonly<Record<string, number>>
  readonly count: number
  readonly firstId: string | null
  readonly lastId: string | null
  /** Events of the range left out because they are invalid (the relay never publishes those). */
  readonly invalid: number
  readonly published: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RepublishRequest {
  readonly from: Date
  readonly to: Date
  readonly topic: string | undefined
  readonly key: string | undefined
  readonly operator: string
  readonly execute: boolean
}

const PAGE = 1_000

const toRequest = (m: LogRecord.LogMessage) => ({
  id: m.id,
  topic: m.topic,
  key: m.key,
  partition: m.partition,
  headers: m.headers,
  payload: m.payload
})

/**
 * Walks the range page by page in id order; `send`, when given, publishes each page's selected
 * events before the next page is read (so memory holds one page).
 */
const walk = <E, R>(
  config: RootConfig,
  request: RepublishRequest,
  send: ((page: ReadonlyArray<LogRecord.LogMessage>) => Effect.Effect<void, E, R>) | undefined
) =>
  Effect.gen(function* () {
    const topics: Record<string, number> = {}
    let count = 0
    let invalid = 0
    let firstId: string | null = null
    let lastId: string | null = null
    let after: string | undefined
    for (;;) {
      const page = yield* PgLogSource.readTable({
        schema: config.schema,
        tablePrefix: config.tablePrefix,
        from: request.from.getTime(),
        to: request.to.getTime(),
        after,
        limit: PAGE
      })
      if (page.length === 0) break
      after = page[page.length - 1]!.id
      const selected = page.filter((m) => {
        if (
          (request.topic !== undefined && m.topic !== request.topic) ||
          (request.key !== undefined && m.key !== request.key)
        )
          return false
        if (m.invalid !== undefined) invalid++
        return m.invalid === undefined
      })
      for (const m of selected) topics[m.topic] = (topics[m.topic] ?? 0) + 1
      count += selected.length
      if (selected.length > 0) {
        firstId ??= selected[0]!.id
        lastId = selected[selected.length - 1]!.id
        if (send !== undefined) yield* send(selected)
      }
      if (page.length < PAGE) break
    }
    return { topics, count, invalid, firstId, lastId }
  })

/**
 * Counts the range (dry run), or publishes it in id order through the configured Kafka client,
 * stopping at the first record the broker refuses. Audited either way when `execute` is set.
 *
 * @since 0.1.0
 * @category operations
 */
export const republish = (config: RootConfig, request: RepublishRequest) =>
  Effect.gen(function* () {
    if (request.from.getTime() >= request.to.getTime()) {
      return yield* new Operations.OperatorError({ reason: "--from must be before --to" })
    }
    const base = {
      from: request.from.toISOString(),
      to: request.to.toISOString(),
      topic: request.topic ?? null,
      key: request.key ?? null
    }
    if (!request.execute) {
      const seen = yield* walk<never, never>(config, request, undefined).pipe(Effect.provide(database(config)))
      return { ...base, ...seen, dryRun: true, published: 0 } satisfies RepublishReport
    }
    let published = 0
    const audit = (outcome: string) =>
      Effect.logWarning(
        `AUDIT outbox log republish by ${request.operator}: ${published} event(s) from ${base.from} to ${base.to}` +
          ` (topic ${base.topic ?? "any"}, key ${base.key ?? "any"}) ${outcome}`
      ).pipe(Effect.annotateLogs({ audit: "outbox.log.republish", operator: request.operator }))
    const seen = yield* Effect.gen(function* () {
      const publisher = yield* Publisher
      return yield* walk(config, request, (page) =>
        Effect.gen(function* () {
          const outcomes = yield* publisher.publish(page.map(toRequest))
          published += outcomes.filter(Result.isSuccess).length
          const failed = outcomes.findIndex(Result.isFailure)
          if (failed < 0) return
          const refused = outcomes.filter(Result.isFailure).length
          const error = (outcomes[failed] as Result.Failure<unknown, { readonly message: string }>).failure
          return yield* new Operations.OperatorError({
            reason: `the broker refused ${refused} event(s), the first ${page[failed]!.id} (${error.message}); ${published} event(s) were republished; nothing after this page was sent`
          })
        })
      )
    }).pipe(
      Effect.provide(Layer.merge(database(config), reachableBroker(config))),
      Effect.tapError(() => audit("then stopped on an error")),
      Effect.tap(() => audit("sent again (duplicates on purpose)"))
    )
    return { ...base, ...seen, dryRun: false, published } satisfies RepublishReport
  })

const render = (r: RepublishReport): string => {
  const filter = `${r.topic === null ? "" : ` topic ${r.topic}`}${r.key === null ? "" : ` key ${r.key}`}`
  const head = r.dryRun
    ? `would republish (dry run; add --execute) ${r.count} event(s) from ${r.from} to ${r.to}${filter}`
    : `republished ${r.published} event(s) from ${r.from} to ${r.to}${filter}`
  const topics = Object.entries(r.topics).map(([topic, n]) => `  ${topic}: ${n}`)
  return [
    head,
    ...topics,
    ...(r.count > 0 ? [`first ${r.firstId}, last ${r.lastId} (id order)`] : []),
    ...(r.invalid > 0 ? [`${r.invalid} invalid event(s) left out (never published)`] : []),
    "These are duplicates on purpose: consumers that dedupe by event id (the Inbox) skip what they already handled."
  ].join("\n")
}

/**
 * @since 0.1.0
 * @category commands
 */
export const republishCommand = Command.make(
  "republish",
  {
    from: Flag.Date("from").pipe(Flag.withDescription("events enqueued at or after this time (ISO 8601)")),
    to: Flag.Date("to").pipe(Flag.withDescription("events enqueued before this time (ISO 8601)")),
    topic: Flag.String("topic").pipe(Flag.withDescription("only this topic"), Flag.optional),
    key: Flag.String("key").pipe(Flag.withDescription("only this key"), Flag.optional),
    operator: selectionFlags.operator,
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      const config: RootConfig = yield* root
      const report = yield* republish(config, {
        ...input,
        topic: Option.getOrUndefined(input.topic),
        key: Option.getOrUndefined(input.key)
      })
      yield* Console.log(config.json ? JSON.stringify(report, null, 2) : render(report))
    }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))
).pipe(
  Command.withDescription(
    "publish the event table's events of a time window (and topic, key) again, in id order: duplicates on purpose (dry run unless --execute)"
  )
)
