/**
 * Whether relays are running, judged for the overview: pending events older than a threshold
 * with no live relay heartbeat is the outage an operator must see first ("no relay is running"),
 * not an ordinary backlog.
 */
import type { RelayHeartbeat } from "@effect-outbox/core/ReadModel"
import { escapeHtml } from "../../DashboardHtml.ts"

/** What the overview says about relays: nothing, a warning (orange) or an alert (red). */
export interface Verdict {
  readonly level: "ok" | "warn" | "alert"
  readonly sentence: string
}

const age = (millis: number) =>
  millis >= 3_600_000
    ? `${(millis / 3_600_000).toFixed(1)} h`
    : millis >= 60_000
      ? `${(millis / 60_000).toFixed(1)} min`
      : `${Math.round(millis / 1000)} s`

/**
 * The verdict from the pending count, the oldest pending event's age and the heartbeats
 * (`undefined`: the store keeps none); `lateAfterMillis` is how old a pending event may grow
 * before it counts as waiting too long.
 */
export const judge = (input: {
  readonly pending: number
  readonly oldestPendingAgeMillis: number | null
  readonly relays: ReadonlyArray<RelayHeartbeat> | undefined
  readonly lateAfterMillis: number
  readonly now: number
}): Verdict => {
  const alive = input.relays?.filter((r) => r.alive) ?? []
  const late = input.pending > 0 && (input.oldestPendingAgeMillis ?? 0) > input.lateAfterMillis
  const waiting = `${input.pending} event(s) pending, the oldest for ${age(input.oldestPendingAgeMillis ?? 0)}`
  if (!late) {
    return {
      level: "ok",
      sentence:
        input.relays === undefined
          ? ""
          : alive.length === 0
            ? "No relay is running."
            : `${alive.length} relay(s) running: ${alive.map((r) => r.owner).join(", ")}.`
    }
  }
  if (input.relays === undefined) {
    return { level: "warn", sentence: `${waiting}: is a relay running? (this store keeps no relay heartbeats)` }
  }
  if (alive.length === 0) {
    const last = input.relays[0]
    const since =
      last === undefined
        ? "no relay has ever reported"
        : `the last relay heartbeat (${last.owner}) lapsed ${age(Math.max(0, input.now - last.expiresAt))} ago`
    return {
      level: "alert",
      sentence: `No relay is running: ${waiting}, and ${since}. Start a relay (OutboxRuntime with OUTBOX_RELAY_ENABLED=true) or find the one that crashed.`
    }
  }
  return {
    level: "warn",
    sentence: `${waiting} although ${alive.length} relay(s) run: look at blocked keys, the broker line and the relays' logs.`
  }
}

/** The verdict as the overview's banner (empty when there is nothing to say). */
export const banner = (verdict: Verdict): string =>
  verdict.sentence === ""
    ? ""
    : `<p class="relays ${verdict.level}" data-relays="${verdict.level}" role="${verdict.level === "ok" ? "status" : "alert"}">${escapeHtml(verdict.sentence)}</p>`
