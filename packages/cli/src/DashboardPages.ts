/**
 * The dashboard's pages as HTML strings, rendered from the operations' reports (the same reports
 * the CLI prints). Pure: no service, no I/O.
 *
 * @since 0.1.0
 */
import type * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import type { OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { chart, escapeHtml, table, time } from "./DashboardHtml.ts"
import type * as Samples from "./DashboardSamples.ts"
import type * as Operations from "./Operations.ts"
import { age, availableAtText } from "./Render.ts"

/**
 * What the broker answered for the overview, or why it could not.
 *
 * @since 0.1.0
 * @category models
 */
export type BrokerView =
  | {
      readonly _tag: "Answered"
      readonly consumerLag: ReadonlyArray<Operations.GroupLag>
      readonly deadLetters: ReadonlyArray<DeadLetterDepth.Depth>
    }
  | { readonly _tag: "Unavailable"; readonly reason: string }

const card = (label: string, value: string | number, attribute: string, warn: boolean | "alert" = false) =>
  `<div class="card${warn === "alert" ? " alert" : warn ? " warn" : ""}"><span>${escapeHtml(label)}</span><b ${attribute}>${escapeHtml(value)}</b></div>`

const rowLink = (base: string, id: string) => `<a href="${base}/rows/${escapeHtml(id)}">${escapeHtml(id)}</a>`

const repairLink = (base: string, action: string, id: string, label: string) =>
  `<a href="${base}/repairs?action=${action}&amp;ids=${escapeHtml(id)}">${escapeHtml(label)}</a>`

/**
 * The overview's content (the part the live stream replaces).
 *
 * @since 0.1.0
 * @category pages
 */
export const overview = (options: {
  readonly base: string
  readonly status: Operations.Status
  readonly broker: BrokerView
  readonly samples: ReadonlyArray<Samples.Sample>
  readonly windowMillis: number
  readonly readOnly: boolean
  /** Whether relays run (a banner, and the pending cards' colour); none when unknown. */
  readonly relays?: { readonly level: "ok" | "warn" | "alert"; readonly banner: string } | undefined
  /** The deployment's health checks, rendered. */
  readonly health?: string | undefined
}): string => {
  const { base, status } = options
  const late = options.relays?.level === "alert" ? "alert" : options.relays?.level === "warn"
  const deadLetterPending =
    options.broker._tag === "Answered" ? options.broker.deadLetters.reduce((n, d) => n + d.pending, 0) : null
  const cards = [
    card("events", status.total, `data-metric="total"`),
    ...Lifecycle.statuses.map((s) =>
      card(
        s,
        status.byStatus[s] ?? 0,
        `data-count="${s}"`,
        s === "PENDING" ? late : s === "FAILURE" && (status.byStatus[s] ?? 0) > 0
      )
    ),
    card(
      "oldest pending",
      status.oldestPendingAgeMillis === null ? "none" : age(status.oldestPendingAgeMillis),
      `data-metric="oldest-pending"`,
      late
    ),
    card("stale leases", status.staleLeases, `data-metric="stale-leases"`, status.staleLeases > 0),
    card("blocked keys", status.blockedKeys, `data-metric="blocked-keys"`, status.blockedKeys > 0),
    card(
      "stuck rows",
      status.stuckProcessing.rows.length,
      `data-metric="stuck"`,
      status.stuckProcessing.rows.length > 0
    ),
    card("dead letters", deadLetterPending ?? "?", `data-metric="dead-letters"`, (deadLetterPending ?? 0) > 0)
  ].join("")
  const topics = table(
    ["topic", ...Lifecycle.statuses, "oldest pending", "stale"],
    status.topics.map((t) => [
      escapeHtml(t.topic),
      ...Lifecycle.statuses.map(
        (s) => `<span data-topic="${escapeHtml(t.topic)}" data-status="${s}">${t.byStatus[s] ?? 0}</span>`
      ),
      escapeHtml(age(t.oldestPendingAgeMillis)),
      String(t.staleLeases)
    ])
  )
  const failures = table(
    ["event", "topic", "key", "attempts", "last error", ...(options.readOnly ? [] : ["repair"])],
    status.failures.map((f) => [
      rowLink(base, f.id),
      escapeHtml(f.topic),
      escapeHtml(f.key ?? "-"),
      String(f.attempts),
      escapeHtml(f.lastError ?? "-"),
      ...(options.readOnly
        ? []
        : [`${repairLink(base, "requeue", f.id, "requeue")} · ${repairLink(base, "skip", f.id, "skip")}`])
    ])
  )
  const stuck = table(
    ["event", "topic", "updated", "repair"],
    status.stuckProcessing.rows.map((r) => [
      rowLink(base, r.id),
      escapeHtml(r.topic),
      escapeHtml(time(r.updatedAt)),
      escapeHtml(r.repair)
    ])
  )
  let brokerPart: string
  if (options.broker._tag === "Unavailable") {
    brokerPart = `<p class="error">Broker: ${escapeHtml(options.broker.reason)}</p>`
  } else {
    const lag = table(
      ["group", "topic", "partition", "committed", "end", "lag"],
      options.broker.consumerLag.flatMap((g) =>
        g.partitions.map((p) => [
          escapeHtml(g.group),
          escapeHtml(g.topic),
          String(p.partition),
          escapeHtml(p.committed ?? "-"),
          escapeHtml(p.end),
          `<span data-lag="${escapeHtml(`${g.group}/${g.topic}/${p.partition}`)}">${p.lag}</span>`
        ])
      )
    )
    const depth = table(
      ["dead-letter topic", "not replayed", "held"],
      options.broker.deadLetters.map((d) => [
        `<a href="${base}/dead-letters?topic=${encodeURIComponent(d.deadLetterTopic)}">${escapeHtml(d.deadLetterTopic)}</a>`,
        `<span data-dlt-pending="${escapeHtml(d.deadLetterTopic)}">${d.pending}</span>`,
        String(d.total)
      ])
    )
    brokerPart = `<h2>Consumer lag</h2>${lag}<h2>Dead letters</h2>${depth}`
  }
  return `${options.relays?.banner ?? ""}<p class="updated">as of <time data-now="${status.now}">${escapeHtml(time(status.now))}</time> UTC</p>
<div class="cards">${cards}</div>${options.health ?? ""}
<h2>Backlog and publish rate</h2>${chart(options.samples, options.windowMillis)}
<h2>By topic</h2>${topics}
<h2>Failures (newest)</h2>${failures}
<h2>Stuck in processing (over ${escapeHtml(age(status.stuckProcessing.stuckAfterMillis))})</h2>${stuck}
${brokerPart}`
}

/**
 * The overview page: the content, inside the element the live stream updates.
 *
 * @since 0.1.0
 * @category pages
 */
export const overviewPage = (content: string): string =>
  `<h1>Overview</h1><div id="overview">${content}</div><p><a href="">Refresh</a></p>`

const field = (label: string, value: string) => `<tr><th>${escapeHtml(label)}</th><td>${value}</td></tr>`

/**
 * One event: fields, receipt, payload, recorded history, consumers that processed it.
 *
 * @since 0.1.0
 * @category pages
 */
export const row = (base: string, inspection: Operations.Inspection, readOnly: boolean): string => {
  const m = inspection.message
  const fields = [
    field("id", escapeHtml(m.id)),
    field("status", `<b data-field="status">${escapeHtml(m.status)}</b>`),
    field("topic", escapeHtml(m.topic)),
    field("key", escapeHtml(m.key ?? "-")),
    field("sequence", String(m.seq)),
    field("attempts", String(m.attempts)),
    field("available at", escapeHtml(availableAtText(m.availableAt, time))),
    field(
      "lease",
      m.leaseOwner === null ? "-" : `${escapeHtml(m.leaseOwner)} until ${escapeHtml(time(m.leaseExpiresAt))}`
    ),
    field("last error", escapeHtml(m.lastError ?? "-")),
    field("created", escapeHtml(time(m.createdAt))),
    field("updated", escapeHtml(time(m.updatedAt))),
    field("published", escapeHtml(time(m.publishedAt))),
    field("processed", escapeHtml(time(m.processedAt))),
    field(
      "receipt",
      m.receipt === null ? "-" : `<code data-field="receipt">${escapeHtml(JSON.stringify(m.receipt))}</code>`
    ),
    field("headers", `<code>${escapeHtml(JSON.stringify(m.headers))}</code>`)
  ].join("")
  const history = table(
    ["at", "from", "to", "lease owner"],
    inspection.history.map((h) => [
      escapeHtml(time(h.at)),
      escapeHtml(h.from),
      escapeHtml(h.to),
      escapeHtml(h.leaseOwner ?? "-")
    ]),
    ` data-history`
  )
  const processed = table(
    ["consumer", "identity", "processed at"],
    inspection.processedBy.map((p) => [escapeHtml(p.consumer), escapeHtml(p.identity), escapeHtml(time(p.processedAt))])
  )
  const repairs =
    readOnly || m.status !== "FAILURE"
      ? m.status === "PREQUEUED" && !readOnly
        ? `<p>${repairLink(base, "release", m.id, "Release this row")}</p>`
        : ""
      : `<p>${repairLink(base, "requeue", m.id, "Requeue this row")} · ${repairLink(base, "skip", m.id, "Skip this row")}</p>`
  return `<h1>Event ${escapeHtml(m.id)}</h1>${repairs}<table>${fields}</table>
<h2>Payload (${escapeHtml(inspection.payload.encoding)})</h2><pre>${escapeHtml(inspection.payload.value.slice(0, 10_000))}</pre>
<h2>Recorded history</h2>${history}<h2>Processed by</h2>${processed}`
}

const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`

const auditFields = (operator: string, reason: string) =>
  `<label>Operator <input type="text" name="operator" value="${escapeHtml(operator)}" required></label>
<label>Reason <input type="text" name="reason" value="${escapeHtml(reason)}" required></label>`

/**
 * The actions the repairs page offers.
 *
 * @since 0.1.0
 * @category models
 */
export type RepairAction = "requeue" | "release" | "skip" | "recover-stale"

/**
 * @since 0.1.0
 * @category models
 */
export const repairActions: ReadonlyArray<RepairAction> = ["requeue", "release", "skip", "recover-stale"]

const actionText: Record<RepairAction, string> = {
  requeue: "Requeue FAILURE rows (FAILURE → PENDING, attempts reset)",
  release: "Release PREQUEUED rows (PREQUEUED → PENDING)",
  skip: "Skip blocked heads (FAILURE → SKIPPED: the key's younger events go on)",
  "recover-stale": "Recover stale leases (probe the broker, then mark published or requeue)"
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RepairRequest {
  readonly action: RepairAction
  readonly ids: ReadonlyArray<string>
  readonly topic: string
  readonly limit: number
  readonly operator: string
  readonly reason: string
}

/**
 * The repairs form: an action and its selection; it leads to a dry run.
 *
 * @since 0.1.0
 * @category pages
 */
export const repairs = (options: {
  readonly base: string
  readonly request: RepairRequest
  readonly audit: ReadonlyArray<string>
}): string => {
  const { base, request } = options
  const choices = repairActions
    .map(
      (a) =>
        `<label><input type="radio" name="action" value="${a}"${a === request.action ? " checked" : ""}> ${escapeHtml(actionText[a])}</label>`
    )
    .join("")
  return `<h1>Repairs</h1><p>Every repair is a dry run first; the change happens only once confirmed, and is audited with your name and reason.</p>
<form method="get" action="${base}/repairs/preview" class="repair">${choices}
<label>Event ids (one per line or comma separated) <textarea name="ids" rows="3">${escapeHtml(request.ids.join("\n"))}</textarea></label>
<label>Topic <input type="text" name="topic" value="${escapeHtml(request.topic)}"></label>
<label>At most <input type="number" name="limit" value="${request.limit}" min="1"> rows</label>
${auditFields(request.operator, request.reason)}
<button>Dry run</button></form>
<h2>Audit (this process)</h2>${options.audit.length === 0 ? `<p class="empty">none</p>` : `<ul data-audit>${options.audit.map((line) => `<li>${escapeHtml(line)}</li>`).join("")}</ul>`}`
}

const messageRows = (base: string, rows: ReadonlyArray<OutboxMessage>) =>
  table(
    ["event", "status", "topic", "key", "attempts", "last error"],
    rows.map((m) => [
      rowLink(base, m.id),
      escapeHtml(m.status),
      escapeHtml(m.topic),
      escapeHtml(m.key ?? "-"),
      String(m.attempts),
      escapeHtml(m.lastError ?? "-")
    ]),
    ` data-selected`
  )

/**
 * A repair's dry run: the rows it would change, and the confirmation form.
 *
 * @since 0.1.0
 * @category pages
 */
export const repairPreview = (options: {
  readonly base: string
  readonly request: RepairRequest
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly csrf: string
  readonly readOnly: boolean
}): string => {
  const { base, request } = options
  const confirm =
    options.readOnly || options.rows.length === 0
      ? ""
      : `<form method="post" action="${base}/repairs/execute" class="repair">${hidden("csrf", options.csrf)}${hidden("action", request.action)}${hidden(
          "ids",
          request.action === "recover-stale" ? "" : options.rows.map((r) => r.id).join(",")
        )}${hidden("limit", String(request.limit))}${hidden("operator", request.operator)}${hidden("reason", request.reason)}
<p>By <b>${escapeHtml(request.operator)}</b>, because: <i>${escapeHtml(request.reason)}</i></p>
<button class="danger" name="confirm" value="yes">Confirm: ${escapeHtml(request.action)} ${options.rows.length} row(s)</button></form>`
  return `<h1>${escapeHtml(actionText[request.action])} (dry run)</h1>
<p data-dry-run>Nothing was changed. ${options.rows.length} row(s) selected:</p>${messageRows(base, options.rows)}${confirm}
<p><a href="${base}/repairs">Back</a></p>`
}

/**
 * What an executed action did.
 *
 * @since 0.1.0
 * @category pages
 */
export const result = (options: {
  readonly base: string
  readonly title: string
  readonly lines: ReadonlyArray<string>
}): string =>
  `<h1>${escapeHtml(options.title)}</h1><div class="ok" data-result>${options.lines.map((l) => `<p>${escapeHtml(l)}</p>`).join("")}</div>
<p><a href="${options.base}/">Overview</a> · <a href="${options.base}/repairs">Repairs</a></p>`

/**
 * An error page (a request to correct, or a refused mutation).
 *
 * @since 0.1.0
 * @category pages
 */
export const error = (message: string): string =>
  `<h1>Not done</h1><p class="error" data-error>${escapeHtml(message)}</p>`
