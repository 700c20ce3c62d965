/**
 * The dead-letter pages as HTML strings: the topics and their depth, one page of letters grouped
 * by error class, one letter (payload and headers), the replay and discard dry runs, and the
 * history of what was replayed or discarded. Pure: no service, no I/O.
 */
import type * as DeadLetter from "@effect-outbox/core/DeadLetter"
import type * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import { escapeHtml, table, time } from "../../DashboardHtml.ts"
import type * as Operations from "../../Operations.ts"

/** How much of a payload the letter's page shows. */
export const payloadLimit = 64 * 1024

const place = (l: DeadLetter.DeadLetter) => `${l.record.partition}/${l.record.offset}`

const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`

const auditFields = `<label>Operator <input type="text" name="operator" required></label>
<label>Reason <input type="text" name="reason" required></label>`

const listUrl = (base: string, topic: string, query: { readonly skip?: number; readonly errorClass?: string }) =>
  `${base}/dead-letters?topic=${encodeURIComponent(topic)}${query.errorClass === undefined ? "" : `&amp;class=${encodeURIComponent(query.errorClass)}`}${query.skip === undefined || query.skip === 0 ? "" : `&amp;skip=${query.skip}`}`

const letterUrl = (base: string, topic: string, l: DeadLetter.DeadLetter) =>
  `${base}/dead-letters/letter?topic=${encodeURIComponent(topic)}&amp;letter=${encodeURIComponent(place(l))}`

/** The dead-letter topics of the outbox's topics with their depth. */
export const topics = (base: string, depths: ReadonlyArray<DeadLetterDepth.Depth>): string =>
  `<h1>Dead letters</h1>${table(
    ["dead-letter topic", "not handled", "held", ""],
    depths.map((d) => [
      `<a href="${base}/dead-letters?topic=${encodeURIComponent(d.deadLetterTopic)}">${escapeHtml(d.deadLetterTopic)}</a>`,
      String(d.pending),
      String(d.total),
      `<a href="${base}/dead-letters/history?topic=${encodeURIComponent(d.deadLetterTopic)}">history</a>`
    ])
  )}
<form method="get" action="${base}/dead-letters"><label>Another dead-letter topic <input type="text" name="topic" required></label> <button>List</button></form>`

/** The error classes of the letters shown, with their counts, each a filter link. */
const classes = (
  base: string,
  topic: string,
  letters: ReadonlyArray<DeadLetter.DeadLetter>,
  errorClass: string | undefined
) => {
  const counts = new Map<string, number>()
  for (const l of letters) counts.set(l.errorClass, (counts.get(l.errorClass) ?? 0) + 1)
  const rows = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([name, n]) => [
      `<a href="${listUrl(base, topic, { errorClass: name })}">${escapeHtml(name)}</a>`,
      `<span data-class-count="${escapeHtml(name)}">${n}</span>`
    ])
  const filter =
    errorClass === undefined
      ? ""
      : `<p data-class-filter>only <b>${escapeHtml(errorClass)}</b> · <a href="${listUrl(base, topic, {})}">every class</a></p>`
  return `<h2>By error class (this page)</h2>${filter}${table(["error class", "letters"], rows, " data-class-groups")}`
}

/** The latest handling of a letter: what, by whom, when. */
const handledCell = (handled: ReadonlyArray<Operations.Handling> | undefined) => {
  const last = handled?.at(-1)
  return last === undefined
    ? ""
    : `<span data-handled="${escapeHtml(last.action)}">${escapeHtml(`${last.action === "replay" ? "replayed" : "discarded"} by ${last.operator}, ${time(last.at)}`)}</span>`
}

/** One page of the letters of a topic, grouped by error class, each selectable for a replay or a discard. */
export const list = (options: {
  readonly base: string
  readonly topic: string
  readonly letters: ReadonlyArray<DeadLetter.DeadLetter>
  /** What was done with the letters shown, by place (`partition/offset`). */
  readonly handled: ReadonlyMap<string, ReadonlyArray<Operations.Handling>>
  readonly readOnly: boolean
  readonly errorClass: string | undefined
  readonly page: { readonly skip: number; readonly size: number; readonly more: boolean }
}): string => {
  const { base, topic, letters, readOnly, page, errorClass } = options
  const rows = letters.map((l) => [
    readOnly
      ? ""
      : `<input type="checkbox" name="letter" value="${escapeHtml(place(l))}" aria-label="select ${escapeHtml(l.eventId ?? place(l))}">`,
    `<a href="${letterUrl(base, topic, l)}" data-letter="${escapeHtml(place(l))}">${escapeHtml(l.eventId ?? place(l))}</a>`,
    escapeHtml(`${l.originalTopic}[${l.originalPartition}]@${l.originalOffset}`),
    `<span data-error-class>${escapeHtml(l.errorClass)}</span>`,
    escapeHtml(l.errorMessage),
    String(l.attempts),
    escapeHtml(l.consumerGroup),
    escapeHtml(time(l.deadLetteredAt)),
    String(l.replayAttempt),
    handledCell(options.handled.get(`${l.record.partition}/${BigInt(l.record.offset)}`))
  ])
  const at = (skip: number) => listUrl(base, topic, { skip, ...(errorClass === undefined ? {} : { errorClass }) })
  const nav = [
    page.skip > 0 ? `<a href="${at(Math.max(0, page.skip - page.size))}" data-page="previous">previous</a>` : "",
    page.more ? `<a href="${at(page.skip + letters.length)}" data-page="next">next</a>` : ""
  ].join(" ")
  const shown = `letters ${letters.length === 0 ? 0 : page.skip + 1}–${page.skip + letters.length}${page.more ? " (more follow)" : ""}`
  const actions = readOnly ? "" : `<label><input type="checkbox" data-select-all> select all</label>`
  const buttons = readOnly
    ? ""
    : `<button formaction="${base}/dead-letters/replay">Replay selected…</button> <button formaction="${base}/dead-letters/discard">Discard selected…</button>`
  return `<h1>Dead letters on ${escapeHtml(topic)}</h1><p data-page-range>${shown}, oldest first per partition (handled ones included; the overview counts those not yet handled). ${nav} · <a href="${base}/dead-letters/history?topic=${encodeURIComponent(topic)}">history</a></p>
${classes(base, topic, letters, errorClass)}
<form method="get" action="${base}/dead-letters/replay">${hidden("topic", topic)}${actions}${table(
    ["", "event", "from", "error class", "reason", "attempts", "group", "dead-lettered", "replays", "handled"],
    rows,
    ` data-dead-letters`
  )}
${buttons}</form>`
}

/** The payload as text (pretty JSON when it parses), cut at {@link payloadLimit} with a note. */
const payload = (bytes: Uint8Array): string => {
  const shown = bytes.subarray(0, payloadLimit)
  const note =
    bytes.length > payloadLimit
      ? `<p class="warn" data-payload-truncated>showing the first ${payloadLimit} of ${bytes.length} bytes</p>`
      : ""
  let text: string
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes)
    // A character cut at the limit shows as U+FFFD.
    text = new TextDecoder().decode(shown)
  } catch {
    // Not UTF-8: the bytes in hex, as much as the limit allows.
    const hex = Buffer.from(shown.subarray(0, payloadLimit / 2)).toString("hex")
    return `${note}<p data-payload-kind="binary">${bytes.length} bytes, not UTF-8 text; hex:</p><pre data-payload>${escapeHtml(hex)}</pre>`
  }
  let kind = "text"
  if (bytes.length <= payloadLimit) {
    try {
      text = JSON.stringify(JSON.parse(text), null, 2)
      kind = "json"
    } catch {
      // not JSON: shown as text
    }
  }
  return `${note}<p data-payload-kind="${kind}">${bytes.length} bytes, ${kind === "json" ? "JSON" : "text"}</p><pre data-payload>${escapeHtml(text)}</pre>`
}

const field = (label: string, value: string) => `<tr><th>${escapeHtml(label)}</th><td>${escapeHtml(value)}</td></tr>`

/** One letter: its diagnostics, every header, its payload, what was done with it, and its actions. */
export const letter = (options: {
  readonly base: string
  readonly topic: string
  readonly letter: DeadLetter.DeadLetter
  readonly handled: ReadonlyArray<Operations.Handling>
  readonly readOnly: boolean
}): string => {
  const { base, topic, letter: l } = options
  const fields = [
    field("place", `${topic} partition ${l.record.partition} offset ${l.record.offset}`),
    field("event", l.eventId ?? "-"),
    field("key", l.record.key ?? "-"),
    field("from", `${l.originalTopic}[${l.originalPartition}]@${l.originalOffset}`),
    field("error class", l.errorClass),
    field("reason", l.errorMessage),
    field("attempts", String(l.attempts)),
    field("group", l.consumerGroup),
    field("dead-lettered", time(l.deadLetteredAt)),
    field("replays before", String(l.replayAttempt))
  ].join("")
  const headers = table(
    ["header", "value"],
    Object.entries(l.record.headers).map(([name, value]) => [escapeHtml(name), escapeHtml(value)]),
    " data-headers"
  )
  const selection = `${hidden("topic", topic)}${hidden("letter", place(l))}`
  const actions = options.readOnly
    ? ""
    : `<form method="get" action="${base}/dead-letters/replay">${selection}<button>Replay…</button> <button formaction="${base}/dead-letters/discard">Discard…</button></form>`
  return `<h1>Dead letter ${escapeHtml(l.eventId ?? place(l))}</h1><table data-letter-fields>${fields}</table>
<h2>Handled</h2>${historyTable([...options.handled].reverse())}
<h2>Headers</h2>${headers}<h2>Payload</h2>${payload(l.record.value)}${actions}
<p><a href="${listUrl(base, topic, {})}">Letters of ${escapeHtml(topic)}</a></p>`
}

const historyTable = (handled: ReadonlyArray<Operations.Handling>) =>
  table(
    ["when", "action", "letter", "event", "error class", "by", "reason"],
    handled.map((h) => [
      escapeHtml(time(h.at)),
      `<span data-action>${escapeHtml(h.action)}</span>`,
      escapeHtml(`${h.partition}/${h.offset}`),
      escapeHtml(h.eventId ?? "-"),
      escapeHtml(h.errorClass),
      escapeHtml(h.operator),
      escapeHtml(h.reason)
    ]),
    " data-history"
  )

/** What was replayed or discarded from a topic, newest first. */
export const history = (base: string, topic: string, handled: ReadonlyArray<Operations.Handling>, limit: number) =>
  `<h1>History of ${escapeHtml(topic)}</h1><p>The latest ${limit} replays and discards made from the dashboard, newest first, from the audit topic <code>${escapeHtml(topic)}.audit</code>.</p>
${historyTable(handled)}<p><a href="${listUrl(base, topic, {})}">Letters of ${escapeHtml(topic)}</a></p>`

const selectedRows = (letters: ReadonlyArray<DeadLetter.DeadLetter>) =>
  letters.map((l) => [
    escapeHtml(place(l)),
    escapeHtml(l.eventId ?? "-"),
    escapeHtml(l.originalTopic),
    escapeHtml(l.errorClass),
    escapeHtml(l.errorMessage)
  ])

/** A dry run: the letters an action would take, and its confirmation form. */
export const preview = (options: {
  readonly base: string
  readonly topic: string
  readonly action: "replay" | "discard"
  readonly letters: ReadonlyArray<DeadLetter.DeadLetter>
  /** Places asked for that hold no dead letter. */
  readonly missing?: ReadonlyArray<Operations.Place> | undefined
  readonly csrf: string
  readonly readOnly: boolean
}): string => {
  const { base, letters, action } = options
  const field = action === "replay" ? "eventId" : "letter"
  const values = letters.map((l) => (action === "replay" ? (l.eventId ?? "") : place(l)))
  const confirm =
    options.readOnly || letters.length === 0
      ? ""
      : `<form method="post" action="${base}/dead-letters/${action}" class="repair">${hidden("csrf", options.csrf)}${hidden("topic", options.topic)}${values
          .map((v) => hidden(field, v))
          .join("")}${auditFields}
<button class="danger" name="confirm" value="yes">Confirm: ${action} ${letters.length} dead letter(s)</button></form>`
  const missing = (options.missing ?? [])
    .map((p) => `<p class="warn" data-missing>${escapeHtml(`${p.partition}/${p.offset}`)}: no dead letter there</p>`)
    .join("")
  const what =
    action === "replay"
      ? "Nothing was republished. These would be:"
      : "Nothing was discarded. These would be marked handled, without a replay:"
  return `<h1>${action === "replay" ? "Replay" : "Discard"} from ${escapeHtml(options.topic)} (dry run)</h1><p data-dry-run>${what}</p>
${table(["letter", "event", "to", "error class", "reason"], selectedRows(letters))}${missing}${confirm}`
}
