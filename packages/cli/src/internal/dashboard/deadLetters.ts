import * as Effect from "effect/Effect"
import { HttpRouter, UrlParams } from "effect/http"
import * as Pages from "../../DashboardPages.ts"
import * as Operations from "../../Operations.ts"
import { type Context, first } from "./shared.ts"

/** Dead letters per page of `/dead-letters?topic=`. */
export const pageSize = 100

/** How far `?skip=` may page into a topic: each page reads the letters before it. */
const maxSkip = 100_000

/** `/dead-letters`: the dead-letter topics of the outbox's topics, their letters, and the audited replay. */
export const routes = (ctx: Context) => {
  const outboxTopics = Effect.map(Operations.status({}), (report) => report.topics.map((t) => t.topic))

  const replayPreview = (topic: string, eventIds: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (topic === "") return yield* new Operations.OperatorError({ reason: "name the dead-letter topic" })
      const report = yield* Operations.replay({ from: topic, eventIds, all: false, execute: false })
      return yield* ctx.render(
        "Replay",
        Pages.replayPreview({ base: ctx.base, topic, report, csrf: ctx.csrf, readOnly: ctx.settings.readOnly })
      )
    })

  const replay = (form: UrlParams.UrlParams) =>
    Effect.gen(function* () {
      const topic = (first(form, "topic") ?? "").trim()
      const eventIds = UrlParams.getAll(form, "eventId").filter((id) => id !== "")
      const operator = first(form, "operator") ?? ""
      const reason = first(form, "reason") ?? ""
      if (eventIds.length === 0) return yield* new Operations.OperatorError({ reason: "select dead letters to replay" })
      const report = yield* Operations.replay({ from: topic, eventIds, all: false, execute: true })
      const failed = report.result?.failed ?? []
      const line = `replay by ${operator} (${reason}): ${report.result?.replayed.length ?? 0} of ${report.selected.length} dead letter(s) from ${topic}`
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

  return [
    HttpRouter.route(
      "GET",
      "/dead-letters",
      ctx.guarded((_, url) =>
        Effect.gen(function* () {
          const topic = (url.searchParams.get("topic") ?? "").trim()
          if (topic === "") {
            const depths = yield* Operations.deadLetterDepth(yield* outboxTopics)
            return yield* ctx.render("Dead letters", Pages.deadLetterTopics(ctx.base, depths))
          }
          // One page at a time: the read stops after `skip + pageSize + 1` letters, whatever the topic holds.
          const skip = Math.min(Math.max(0, Math.trunc(Number(url.searchParams.get("skip") ?? 0)) || 0), maxSkip)
          const letters = yield* Operations.deadLetters(topic, { skip, limit: pageSize + 1 })
          return yield* ctx.render(
            "Dead letters",
            Pages.deadLetterList(ctx.base, topic, letters.slice(0, pageSize), ctx.settings.readOnly, {
              skip,
              size: pageSize,
              more: letters.length > pageSize
            })
          )
        })
      )
    ),
    HttpRouter.route(
      "GET",
      "/dead-letters/replay",
      ctx.guarded((_, url) =>
        replayPreview((url.searchParams.get("topic") ?? "").trim(), url.searchParams.getAll("eventId"))
      )
    ),
    HttpRouter.route("POST", "/dead-letters/replay", ctx.mutation(replay))
  ]
}
