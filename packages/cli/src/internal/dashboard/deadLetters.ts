import * as Effect from "effect/Effect"
import { HttpRouter, UrlParams } from "effect/http"
import * as Pages from "../../DashboardPages.ts"
import * as Operations from "../../Operations.ts"
import * as DeadLetterPages from "./deadLetterPages.ts"
import { type Context, first } from "./shared.ts"

/** Dead letters per page of `/dead-letters?topic=`. */
export const pageSize = 100

/** How far `?skip=` may page into a topic: each page reads the letters before it. */
const maxSkip = 100_000

/** How many handlings the history page shows. */
const historyLimit = 200

const topicOf = (url: URL) => (url.searchParams.get("topic") ?? "").trim()

const placesOf = (values: ReadonlyArray<string>) =>
  Effect.forEach(
    values.filter((v) => v.trim() !== ""),
    (v) => Operations.parsePlace(v)
  )

const outboxTopics = Effect.map(Operations.status({}), (report) => report.topics.map((t) => t.topic))

const listPage = (ctx: Context, url: URL) =>
  Effect.gen(function* () {
    const topic = topicOf(url)
    if (topic === "") {
      const depths = yield* Operations.deadLetterDepth(yield* outboxTopics)
      return yield* ctx.render("Dead letters", DeadLetterPages.topics(ctx.base, depths))
    }
    const errorClass = (url.searchParams.get("class") ?? "").trim() || undefined
    // One page at a time: the read stops after `skip + pageSize + 1` letters, whatever the topic holds.
    const skip = Math.min(Math.max(0, Math.trunc(Number(url.searchParams.get("skip") ?? 0)) || 0), maxSkip)
    const letters = yield* Operations.deadLetters(topic, {
      skip,
      limit: pageSize + 1,
      filter: errorClass === undefined ? undefined : (l) => l.errorClass === errorClass
    })
    const shown = letters.slice(0, pageSize)
    const handled = yield* Operations.handlingsAt(
      topic,
      shown.map((l) => l.record)
    )
    return yield* ctx.render(
      "Dead letters",
      DeadLetterPages.list({
        base: ctx.base,
        topic,
        letters: shown,
        handled,
        readOnly: ctx.settings.readOnly,
        errorClass,
        page: { skip, size: pageSize, more: letters.length > pageSize }
      })
    )
  })

const letterPage = (ctx: Context, url: URL) =>
  Effect.gen(function* () {
    const topic = topicOf(url)
    const place = yield* Operations.parsePlace(url.searchParams.get("letter") ?? "")
    const [letter] = yield* Operations.deadLettersAt(topic, [place])
    if (letter === undefined) {
      return yield* new Operations.OperatorError({
        reason: `no dead letter at ${place.partition}/${place.offset} on ${topic}`
      })
    }
    const handled = (yield* Operations.handlingsAt(topic, [place])).get(Operations.placeKey(place)) ?? []
    return yield* ctx.render(
      "Dead letter",
      DeadLetterPages.letter({ base: ctx.base, topic, letter, handled, readOnly: ctx.settings.readOnly })
    )
  })

// Chosen by place (the list's checkboxes) or by event id; a replay republishes by event id.
const replayPreview = (ctx: Context, url: URL) =>
  Effect.gen(function* () {
    const topic = topicOf(url)
    if (topic === "") return yield* new Operations.OperatorError({ reason: "name the dead-letter topic" })
    const places = yield* placesOf(url.searchParams.getAll("letter"))
    const byPlace = (yield* Operations.deadLettersAt(topic, places)).flatMap((l) =>
      l.eventId === null ? [] : [l.eventId]
    )
    const eventIds = [...new Set([...url.searchParams.getAll("eventId"), ...byPlace])]
    if (eventIds.length === 0) {
      return yield* new Operations.OperatorError({ reason: "select dead letters with an event id to replay" })
    }
    const report = yield* Operations.replay({ from: topic, eventIds, all: false, execute: false })
    return yield* ctx.render(
      "Replay",
      DeadLetterPages.preview({
        base: ctx.base,
        topic,
        action: "replay",
        letters: report.selected,
        csrf: ctx.csrf,
        readOnly: ctx.settings.readOnly
      })
    )
  })

const replay = (ctx: Context) => (form: UrlParams.UrlParams) =>
  Effect.gen(function* () {
    const topic = (first(form, "topic") ?? "").trim()
    const eventIds = UrlParams.getAll(form, "eventId").filter((id) => id !== "")
    const operator = (first(form, "operator") ?? "").trim()
    const reason = (first(form, "reason") ?? "").trim()
    if (eventIds.length === 0) return yield* new Operations.OperatorError({ reason: "select dead letters to replay" })
    const report = yield* Operations.replayAudited({
      from: topic,
      eventIds,
      all: false,
      execute: true,
      operator,
      reason
    })
    const replayed = report.result?.replayed ?? []
    const failed = report.result?.failed ?? []
    const line = `replay by ${operator} (${reason}): ${replayed.length} of ${report.selected.length} dead letter(s) from ${topic}`
    yield* ctx.recordAudit(line)
    return yield* ctx.render(
      "Replayed",
      Pages.result({
        base: ctx.base,
        title: "Replayed",
        lines: [
          line,
          ...failed.map(
            (f) => `${f.deadLetter.eventId ?? "?"}: the broker refused it (${f.error.message}); replay it again`
          )
        ]
      })
    )
  })

const discardPreview = (ctx: Context, url: URL) =>
  Effect.gen(function* () {
    const topic = topicOf(url)
    const places = yield* placesOf(url.searchParams.getAll("letter"))
    const report = yield* Operations.discardDeadLetters({
      from: topic,
      places,
      operator: "",
      reason: "",
      execute: false
    })
    return yield* ctx.render(
      "Discard",
      DeadLetterPages.preview({
        base: ctx.base,
        topic,
        action: "discard",
        letters: report.selected,
        missing: report.missing,
        csrf: ctx.csrf,
        readOnly: ctx.settings.readOnly
      })
    )
  })

const discard = (ctx: Context) => (form: UrlParams.UrlParams) =>
  Effect.gen(function* () {
    const topic = (first(form, "topic") ?? "").trim()
    const places = yield* placesOf(UrlParams.getAll(form, "letter"))
    const operator = (first(form, "operator") ?? "").trim()
    const reason = (first(form, "reason") ?? "").trim()
    const report = yield* Operations.discardDeadLetters({ from: topic, places, operator, reason, execute: true })
    const line = `discard by ${operator} (${reason}): ${report.selected.length} of ${places.length} dead letter(s) from ${topic}`
    yield* ctx.recordAudit(line)
    return yield* ctx.render(
      "Discarded",
      Pages.result({
        base: ctx.base,
        title: "Discarded",
        lines: [
          line,
          ...report.missing.map((p) => `${p.partition}/${p.offset}: no dead letter there (nothing discarded)`)
        ]
      })
    )
  })

const historyPage = (ctx: Context, url: URL) =>
  Effect.gen(function* () {
    const topic = topicOf(url)
    if (topic === "") return yield* new Operations.OperatorError({ reason: "name the dead-letter topic" })
    const handled = yield* Operations.deadLetterHistory(topic, { limit: historyLimit })
    return yield* ctx.render("History", DeadLetterPages.history(ctx.base, topic, handled, historyLimit))
  })

/** `/dead-letters`: the dead-letter topics, their letters, one letter, the audited replay and discard, the history. */
export const routes = (ctx: Context) => [
  HttpRouter.route(
    "GET",
    "/dead-letters",
    ctx.guarded((_, url) => listPage(ctx, url))
  ),
  HttpRouter.route(
    "GET",
    "/dead-letters/letter",
    ctx.guarded((_, url) => letterPage(ctx, url))
  ),
  HttpRouter.route(
    "GET",
    "/dead-letters/history",
    ctx.guarded((_, url) => historyPage(ctx, url))
  ),
  HttpRouter.route(
    "GET",
    "/dead-letters/replay",
    ctx.guarded((_, url) => replayPreview(ctx, url))
  ),
  HttpRouter.route("POST", "/dead-letters/replay", ctx.mutation(replay(ctx))),
  HttpRouter.route(
    "GET",
    "/dead-letters/discard",
    ctx.guarded((_, url) => discardPreview(ctx, url))
  ),
  HttpRouter.route("POST", "/dead-letters/discard", ctx.mutation(discard(ctx)))
]
