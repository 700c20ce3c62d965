/**
 * The deployment's health as the CLI and the dashboard see it from the database (and the broker
 * when it was asked): the same verdict shape as the runtime's readiness checks (`Health` in
 * core), judged for the whole deployment rather than one process. A running process answers its
 * own probe; these say whether the pipeline as a whole moves.
 *
 * @since 0.1.0
 */
import type * as Health from "@effect-outbox/core/Health"
import * as Relays from "../internal/dashboard/relays.ts"
import type { Status } from "./Status.ts"

/**
 * How old a pending event may grow before the relays' check fails (default 1 minute).
 *
 * @since 0.1.0
 * @category models
 */
export interface HealthOptions {
  readonly lateAfterMillis?: number | undefined
}

const minutes = (millis: number) => `${Math.round(millis / 60_000)} min`

/**
 * The checks over a status report: `database` (it answered), `relays` (a live relay heartbeat,
 * or no event waiting longer than `lateAfterMillis`), `consumers` (no row stuck in processing),
 * `blocked keys` (none behind a `FAILURE` row), and `broker` when the report asked it.
 *
 * @since 0.1.0
 * @category status
 */
export const healthOf = (report: Status, options: HealthOptions = {}): Health.Report => {
  const verdict = Relays.judge({
    pending: report.byStatus.PENDING ?? 0,
    oldestPendingAgeMillis: report.oldestPendingAgeMillis,
    relays: report.relays,
    lateAfterMillis: options.lateAfterMillis ?? 60_000,
    now: report.now
  })
  const stuck = report.stuckProcessing.rows.length
  const asked = report.consumerLag !== undefined || report.deadLetters !== undefined
  const checks: ReadonlyArray<Health.Check> = [
    { name: "database", ok: true, detail: "answers" },
    ...(report.brokerError !== undefined
      ? [{ name: "broker", ok: false, detail: report.brokerError }]
      : asked
        ? [{ name: "broker", ok: true, detail: "answers" }]
        : []),
    {
      name: "relays",
      ok: verdict.level === "ok",
      detail: verdict.sentence === "" ? "no event waits too long" : verdict.sentence
    },
    {
      name: "consumers",
      ok: stuck === 0,
      detail:
        stuck === 0
          ? "no row stuck in processing"
          : `${stuck} row(s) UNDER_PROCESSING for over ${minutes(report.stuckProcessing.stuckAfterMillis)}: a consumer died mid-record or its bookkeeping failed`
    },
    {
      name: "blocked keys",
      ok: report.blockedKeys === 0,
      detail:
        report.blockedKeys === 0 ? "none" : `${report.blockedKeys} key(s) wait behind a FAILURE row: requeue or skip it`
    }
  ]
  return { ok: checks.every((c) => c.ok), checks }
}
