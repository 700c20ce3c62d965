import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { ReadModel } from "@effect-outbox/core/ReadModel"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Pages from "../../DashboardPages.ts"
import * as Samples from "../../DashboardSamples.ts"
import * as Operations from "../../Operations.ts"
import * as Health from "./health.ts"
import * as Relays from "./relays.ts"
import { type Context, errorMessage, securityHeaders } from "./shared.ts"

/** How the overview samples and waits. */
export interface OverviewOptions {
  readonly groups: ReadonlyArray<string>
  readonly refresh: Duration.Duration
  readonly windowMillis: number
  readonly brokerTimeout: Duration.Duration
  /** How old a pending event may grow before the overview warns (and, with no relay heartbeat, alerts). */
  readonly lateAfterMillis: number
}

/** An overview as a server-sent event (each line of the fragment a `data:` line). */
const asEvent = (content: string) =>
  `event: overview\n${content
    .split("\n")
    .map((l) => `data: ${l}`)
    .join("\n")}\n\n`

/**
 * `/`, its live stream `/events`, and `/rows/:id`; with the sampler that keeps the chart's
 * history while nobody watches.
 */
export const make = (ctx: Context, options: OverviewOptions) =>
  Effect.gen(function* () {
    const samples = yield* Ref.make<ReadonlyArray<Samples.Sample>>([])
    const status = Operations.status({})
    const broker = (topics: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const consumerLag = yield* Operations.consumerLag({ groups: options.groups, topics })
        const deadLetters = yield* Operations.deadLetterDepth(topics)
        return { _tag: "Answered", consumerLag, deadLetters } satisfies Pages.BrokerView
      }).pipe(
        Effect.timeout(options.brokerTimeout),
        Effect.catch((error) => Effect.succeed<Pages.BrokerView>({ _tag: "Unavailable", reason: errorMessage(error) }))
      )

    // Only the sampler appends: the chart's points stay evenly spaced however many pages watch.
    const sample = Effect.gen(function* () {
      const report = yield* status
      const next = Samples.fromCounts(report.now, report.byStatus)
      yield* Ref.update(samples, (all) => Samples.append(all, next, options.windowMillis))
    })

    const relayVerdict = (report: Operations.Status) => {
      const verdict = Relays.judge({
        pending: report.byStatus.PENDING ?? 0,
        oldestPendingAgeMillis: report.oldestPendingAgeMillis,
        relays: report.relays,
        lateAfterMillis: options.lateAfterMillis,
        now: report.now
      })
      return { level: verdict.level, banner: Relays.banner(verdict) }
    }

    const content = Effect.gen(function* () {
      const report = yield* status
      const brokerView = yield* broker(report.topics.map((t) => t.topic))
      const seen: Operations.Status =
        brokerView._tag === "Unavailable"
          ? { ...report, brokerError: brokerView.reason }
          : { ...report, consumerLag: brokerView.consumerLag }
      return Pages.overview({
        relays: relayVerdict(report),
        health: Health.render(Operations.healthOf(seen, { lateAfterMillis: options.lateAfterMillis })),
        base: ctx.base,
        status: report,
        broker: brokerView,
        samples: yield* Ref.get(samples),
        windowMillis: options.windowMillis,
        readOnly: ctx.settings.readOnly
      })
    })

    const live = Effect.map(Effect.context<OutboxStore | ReadModel | BrokerAdmin>(), (context) =>
      HttpServerResponse.stream(
        Stream.fromEffectSchedule(
          content.pipe(
            Effect.map(asEvent),
            Effect.catch((error) =>
              Effect.succeed(`event: failure\ndata: ${errorMessage(error).replaceAll("\n", " ")}\n\n`)
            )
          ),
          Schedule.spaced(options.refresh)
        ).pipe(Stream.encodeText, Stream.provideContext(context)),
        { contentType: "text/event-stream", headers: { ...securityHeaders, "x-accel-buffering": "no" } }
      )
    )

    const routes = [
      HttpRouter.route(
        "GET",
        "/",
        ctx.guarded(() => Effect.flatMap(content, (page) => ctx.render("Overview", Pages.overviewPage(page))))
      ),
      HttpRouter.route(
        "GET",
        "/events",
        ctx.guarded(() => live)
      ),
      HttpRouter.route(
        "GET",
        "/rows/:id",
        ctx.guarded(() =>
          Effect.gen(function* () {
            const params = yield* HttpRouter.params
            const inspection = yield* Operations.inspect(params.id ?? "")
            return yield* ctx.render(
              `Event ${inspection.message.id}`,
              Pages.row(ctx.base, inspection, ctx.settings.readOnly)
            )
          })
        )
      )
    ]
    // The chart's samples accrue while nobody watches, so a page opened at 3 a.m. has a history.
    const sampler = Layer.effectDiscard(
      Effect.forkScoped(sample.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(options.refresh))))
    )
    return { routes, sampler }
  })
