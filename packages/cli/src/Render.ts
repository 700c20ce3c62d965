/**
 * Human-readable output of the operator commands (`--json` prints the reports as they are).
 *
 * @since 0.1.0
 */
import type * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import { BEHIND_ITS_HEAD, type OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { ParkedKey } from "@effect-outbox/core/ParkedStore"
import type * as Operations from "./Operations.ts"
import { healthOf } from "./operations/Health.ts"

/**
 * `1.2 s`, `3.0 min`, `2.5 h`, `4.0 d`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const age = (millis: number | null): string => {
  if (millis === null) return "-"
  if (millis < 60_000) return `${(millis / 1000).toFixed(1)} s`
  if (millis < 3_600_000) return `${(millis / 60_000).toFixed(1)} min`
  if (millis < 86_400_000) return `${(millis / 3_600_000).toFixed(1)} h`
  return `${(millis / 86_400_000).toFixed(1)} d`
}

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

/**
 * @since 0.1.0
 * @category rendering
 */
// Which relays report a live heartbeat; with none, the last one seen.
const relays = (heartbeats: NonNullable<Operations.Status["relays"]>, now: number): string => {
  const alive = heartbeats.filter((r) => r.alive)
  if (alive.length > 0) return `relays: ${alive.length} running (${alive.map((r) => r.owner).join(", ")})`
  const last = heartbeats[0]
  return last === undefined
    ? "relays: none running (no relay has reported)"
    : `relays: none running (the last heartbeat, ${last.owner}, lapsed ${age(Math.max(0, now - last.expiresAt))} ago)`
}

export const status = (report: Operations.Status): string => {
  const counts = Lifecycle.statuses.map((s) => `${s} ${report.byStatus[s] ?? 0}`).join("  ")
  const lines = [
    `events ${report.total}  ${counts}`,
    `oldest pending: ${report.oldestPendingAgeMillis === null ? "none" : `${age(report.oldestPendingAgeMillis)} ago`}`,
    `stale leases: ${report.staleLeases}`,
    `failures: ${report.byStatus.FAILURE ?? 0}`,
    `blocked keys: ${report.blockedKeys}` +
      (report.blockedKeys > 0 ? " (their younger events wait behind a FAILURE row: requeue or skip it)" : ""),
    ...(report.relays === undefined ? [] : [relays(report.relays, report.now)])
  ]
  const health = healthOf(report)
  lines.push(
    "",
    `health: ${health.ok ? "ok" : "FAILING"}`,
    ...health.checks.map((c) => `  ${c.ok ? "ok     " : "FAILING"} ${c.name}: ${c.detail}`)
  )
  if (report.topics.length > 0) {
    lines.push(
      "",
      table(
        ["topic", ...Lifecycle.statuses, "oldest pending", "stale"],
        report.topics.map((t) => [
          t.topic,
          ...Lifecycle.statuses.map((s) => String(t.byStatus[s] ?? 0)),
          age(t.oldestPendingAgeMillis),
          String(t.staleLeases)
        ])
      )
    )
  }
  if (report.brokerError !== undefined) lines.push("", `broker: ${report.brokerError}`)
  if (report.consumerLag !== undefined) {
    lines.push(
      "",
      report.consumerLag.length === 0
        ? "consumer lag: none of the topics exists on the broker"
        : table(
            ["group", "topic", "lag", "per partition (committed/end)"],
            report.consumerLag.map((g) => [
              g.group,
              g.topic,
              String(g.lag),
              g.partitions.map((p) => `${p.partition}:${p.committed ?? "-"}/${p.end}`).join(" ")
            ])
          )
    )
  }
  if (report.deadLetters !== undefined) {
    lines.push(
      "",
      report.deadLetters.length === 0
        ? "dead letters: no dead-letter topic exists for these topics"
        : table(
            ["dead-letter topic", "not replayed", "total", "per partition (replay position/end)"],
            report.deadLetters.map((d) => [
              d.deadLetterTopic,
              String(d.pending),
              String(d.total),
              d.partitions.map((p) => `${p.partition}:${p.position ?? "-"}/${p.end}`).join(" ")
            ])
          )
    )
  }
  if (report.stuckProcessing.rows.length > 0) {
    lines.push(
      "",
      `stuck in processing (UNDER_PROCESSING, not updated for ${age(report.stuckProcessing.stuckAfterMillis)}; ` +
        "a running service's reconciler finishes those already processed):",
      ...report.stuckProcessing.rows.map(
        (row) => `  ${row.id}  ${row.topic}  since ${new Date(row.updatedAt).toISOString()}\n    repair: ${row.repair}`
      )
    )
  }
  if (report.failures.length > 0) {
    lines.push(
      "",
      "recent failures:",
      table(
        ["event id", "topic", "key", "attempts", "last error"],
        report.failures.map((f) => [f.id, f.topic, f.key ?? "-", String(f.attempts), f.lastError ?? "-"])
      )
    )
  }
  return lines.join("\n")
}

const time = (millis: number | null) => (millis === null ? "-" : new Date(millis).toISOString())

/** A row's `availableAt` for a reader: a time, or, for a row set aside, when it comes back. */
export const availableAtText = (availableAt: number, format: (millis: number) => string) =>
  availableAt === BEHIND_ITS_HEAD ? "when its key's head has gone" : format(availableAt)

/**
 * @since 0.1.0
 * @category rendering
 */
export const inspection = (report: Operations.Inspection): string => {
  const m = report.message
  const lines = [
    `event ${m.id}`,
    `  status        ${m.status}`,
    `  topic         ${m.topic}`,
    `  key           ${m.key ?? "-"}`,
    `  partition     ${m.partition ?? "(by key)"}`,
    `  attempts      ${m.attempts}`,
    `  available at  ${availableAtText(m.availableAt, time)}`,
    `  lease         ${m.leaseOwner === null ? "-" : `${m.leaseOwner} until ${time(m.leaseExpiresAt)}`}`,
    `  receipt       ${m.receipt === null ? "-" : `${m.receipt.topic}/${m.receipt.partition}@${m.receipt.offset}`}`,
    `  last error    ${m.lastError ?? "-"}`,
    `  created       ${time(m.createdAt)}`,
    `  updated       ${time(m.updatedAt)}`,
    `  published     ${time(m.publishedAt)}`,
    `  processed     ${time(m.processedAt)}`,
    `  headers       ${JSON.stringify(m.headers)}`,
    `  payload       (${report.payload.encoding}) ${report.payload.value}`,
    "",
    "history:",
    report.history.length === 0
      ? "  (none recorded: the store records transitions when recordTransitions / OUTBOX_RECORD_TRANSITIONS is on)"
      : table(
          ["at", "from", "to", "lease owner"],
          report.history.map((h) => [time(h.at), h.from, h.to, h.leaseOwner ?? "-"])
        )
          .split("\n")
          .map((l) => `  ${l}`)
          .join("\n"),
    "",
    "processed by:",
    report.processedBy.length === 0
      ? "  (no consumer recorded it with its event id)"
      : report.processedBy.map((p) => `  ${p.consumer} at ${time(p.processedAt)}`).join("\n")
  ]
  return lines.join("\n")
}

const rows = (messages: ReadonlyArray<OutboxMessage>) =>
  table(
    ["event id", "topic", "key", "status", "attempts", "created", "last error"],
    messages.map((m) => [
      m.id,
      m.topic,
      m.key ?? "-",
      m.status,
      String(m.attempts),
      time(m.createdAt),
      m.lastError ?? "-"
    ])
  )

/**
 * @since 0.1.0
 * @category rendering
 */
export const change = (report: Operations.ChangeReport): string => {
  const move =
    report.action === "requeue"
      ? "FAILURE -> PENDING"
      : report.action === "skip"
        ? "FAILURE -> SKIPPED"
        : "PREQUEUED -> PENDING"
  if (report.selected.length === 0) return `${report.action}: no matching rows`
  if (report.dryRun) {
    return `${rows(report.selected)}\n\ndry run: ${report.selected.length} rows would move ${move}; add --execute to apply`
  }
  const applied = report.outcomes.filter((o) => o.outcome === "applied").length
  const skipped = report.outcomes.filter((o) => o.outcome !== "applied")
  return [
    `${report.action}: ${applied}/${report.selected.length} rows moved ${move}`,
    ...skipped.map((o) => `  skipped ${o.id}: now ${o.current ?? "missing"}`)
  ].join("\n")
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const stale = (report: Operations.StaleReport): string => {
  if (report.stale.length === 0) return "no stale leases"
  const list = table(
    ["event id", "topic", "partition", "lease owner", "lease expired"],
    report.stale.map((m) => [m.id, m.topic, String(m.partition ?? "-"), m.leaseOwner ?? "-", time(m.leaseExpiresAt)])
  )
  if (report.dryRun || report.result === null) {
    return `${list}\n\ndry run: ${report.stale.length} stale rows; add --execute to probe the broker and recover them`
  }
  const r = report.result
  if (r.heldBy !== undefined) {
    return `${list}\n\nnothing changed: ${r.heldBy} holds the recovery lease (a relay's stale recovery is running); try again later`
  }
  return (
    `${list}\n\nrecovered: ${r.found} found on the broker (published), ${r.requeued} requeued, ${r.failed} failed, ${r.left} left for the next round` +
    (r.skipped > 0 ? `, ${r.skipped} moved meanwhile (left alone)` : "")
  )
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const deadLetters = (letters: ReadonlyArray<DeadLetter.DeadLetter>): string =>
  letters.length === 0
    ? "no dead letters"
    : table(
        ["letter", "event id", "original", "error", "attempts", "group", "dead-lettered", "replays", "message"],
        letters.map((l) => [
          `${l.record.partition}/${l.record.offset}`,
          l.eventId ?? "-",
          `${l.originalTopic}/${l.originalPartition}@${l.originalOffset}`,
          l.errorClass,
          String(l.attempts),
          l.consumerGroup,
          time(l.deadLetteredAt),
          String(l.replayAttempt),
          l.errorMessage.replace(/\s+/g, " ").slice(0, 80)
        ])
      )

/**
 * @since 0.1.0
 * @category rendering
 */
export const replay = (report: Operations.ReplayReport): string => {
  if (report.selected.length === 0) return "no matching dead letters"
  if (report.dryRun || report.result === null) {
    return `${deadLetters(report.selected)}\n\ndry run: ${report.selected.length} dead letters would be republished; add --execute`
  }
  const r = report.result
  return [
    `replayed ${r.replayed.length} dead letters (${r.failed.length} failed, ${r.skipped} skipped)`,
    ...r.failed.map((f) => `  failed ${f.deadLetter.eventId ?? "-"}: ${f.error.message}`)
  ].join("\n")
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const discard = (topic: string, report: Operations.DiscardReport): string => {
  if (report.selected.length === 0) return "no matching dead letters"
  const audit = `${topic}.audit`
  return report.dryRun
    ? `${deadLetters(report.selected)}\n\ndry run: ${report.selected.length} dead letter(s) would be discarded (marked handled on ${audit}, not republished); add --execute`
    : `discarded ${report.selected.length} dead letter(s) of ${topic}: recorded on ${audit}, no longer counted as waiting`
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const deadLetterHistory = (topic: string, handlings: ReadonlyArray<Operations.Handling>): string =>
  handlings.length === 0
    ? `no replay or discard of ${topic}'s dead letters is recorded on ${topic}.audit`
    : table(
        ["at", "action", "letter", "event id", "error", "operator", "reason"],
        handlings.map((h) => [
          time(h.at),
          h.action,
          `${h.partition}/${h.offset}`,
          h.eventId ?? "-",
          h.errorClass,
          h.operator,
          h.reason
        ])
      )

/**
 * @since 0.1.0
 * @category rendering
 */
export const purge = (report: Operations.PurgeReport): string =>
  report.dryRun
    ? `dry run: ${report.rows} rows (${report.statuses.join(", ")}) last updated before ${time(report.olderThan)} would be deleted; add --execute`
    : `purged ${report.rows} rows (${report.statuses.join(", ")}) last updated before ${time(report.olderThan)}`

/**
 * @since 0.1.0
 * @category rendering
 */
export const parked = (keys: ReadonlyArray<ParkedKey>): string =>
  keys.length === 0
    ? "no parked keys"
    : table(
        ["group", "topic/partition", "key", "parked", "head", "offsets"],
        keys.map((k) => [
          k.consumer,
          `${k.topic}/${k.partition}`,
          k.key,
          String(k.offsets.length),
          k.offsets[0] ?? "-",
          k.offsets.length > 10 ? `${k.offsets.slice(0, 10).join(",")},…` : k.offsets.join(",")
        ])
      )

/**
 * @since 0.1.0
 * @category rendering
 */
export const parkedRelease = (report: Operations.ParkedReleaseReport): string => {
  const what = `key ${report.target.key} of ${report.target.topic}/${report.target.partition} (group ${report.target.consumer}): ${report.offsets.length} parked record(s), head at ${report.offsets[0]}`
  return report.dryRun
    ? `dry run: would ask the owning consumer to release ${what} (add --execute)`
    : `release requested for ${what}; the consumer that owns the partition runs them head first`
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const ensuredTopics = (topics: ReadonlyArray<Operations.EnsuredTopic>): string => {
  const pending = topics.filter((t) => t.action === "would create").length
  return [
    table(
      ["topic", "partitions", "", "dead letters of"],
      topics.map((t) => [t.topic, String(t.partitions), t.action, t.deadLetterOf ?? ""])
    ),
    ...(pending > 0 ? ["", `dry run: ${pending} topic(s) would be created; add --execute to create them`] : [])
  ].join("\n")
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const outboxTopics = (topics: ReadonlyArray<Operations.OutboxTopic>): string => {
  if (topics.length === 0) return "the outbox has no rows"
  const missing = topics.filter((t) => t.partitions === null || t.deadLetterPartitions === null).map((t) => t.topic)
  return [
    table(
      ["topic", "rows", "partitions", "dead-letter topic"],
      topics.map((t) => [
        t.topic,
        String(t.rows),
        t.partitions === null ? "MISSING" : String(t.partitions),
        t.deadLetterPartitions === null ? "MISSING" : `${t.topic}.DLT (${t.deadLetterPartitions})`
      ])
    ),
    ...(missing.length > 0
      ? ["", `create the missing ones: effect-outbox topics ensure ${missing.join(" ")} --execute`]
      : [])
  ].join("\n")
}
