/**
 * HTML building blocks for the dashboard: escaping, the page frame, tables, the inline SVG chart,
 * and the stylesheet and script it serves. Every value shown passes through {@link escapeHtml}.
 *
 * @since 0.1.0
 */
import * as Samples from "./DashboardSamples.ts"

/**
 * @since 0.1.0
 * @category html
 */
export const escapeHtml = (value: unknown): string =>
  String(value ?? "")
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;")

/**
 * @since 0.1.0
 * @category html
 */
export const time = (millis: number | null | undefined): string =>
  millis === null || millis === undefined ? "-" : new Date(millis).toISOString().replace("T", " ").replace("Z", "")

/**
 * A table; cells are HTML (escapeHtml values before).
 *
 * @since 0.1.0
 * @category html
 */
export const table = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  attributes = ""
): string =>
  rows.length === 0
    ? `<p class="empty"${attributes}>none</p>`
    : `<table${attributes}><thead><tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>${rows
        .map((row) => `<tr>${row.map((cell) => `<td>${cell}</td>`).join("")}</tr>`)
        .join("")}</tbody></table>`

/**
 * The page frame: navigation, a read-only banner, the stylesheet and the live script.
 *
 * @since 0.1.0
 * @category html
 */
export const page = (options: {
  readonly base: string
  readonly title: string
  readonly readOnly: boolean
  readonly body: string
}): string => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(options.title)} · effect-outbox</title>
<link rel="stylesheet" href="${options.base}/assets/dashboard.css">
<script src="${options.base}/assets/dashboard.js" defer></script>
</head><body data-base="${escapeHtml(options.base)}">
<header><strong>effect-outbox</strong>
<nav><a href="${options.base}/">Overview</a><a href="${options.base}/dead-letters">Dead letters</a><a href="${options.base}/log">Log engine</a>${options.readOnly ? "" : `<a href="${options.base}/repairs">Repairs</a>`}</nav>
<span id="live" class="live" title="live updates">static</span></header>
${options.readOnly ? `<p class="banner" role="status">Read-only: repairs and replays are disabled.</p>` : ""}
<main>${options.body}</main></body></html>`

const polyline = (points: ReadonlyArray<readonly [number, number]>, color: string) =>
  points.length < 2
    ? ""
    : `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ")}"/>`

/**
 * Backlog (left scale) and publish rate (right scale) over the sampled minutes, as inline SVG.
 *
 * @since 0.1.0
 * @category html
 */
export const chart = (samples: ReadonlyArray<Samples.Sample>, windowMillis: number): string => {
  const width = 600
  const height = 140
  const now = samples.at(-1)?.at ?? 0
  // Until the window fills, the samples so far span the whole width.
  const span = Math.max(1, Math.min(windowMillis, now - (samples[0]?.at ?? now)))
  const x = (at: number) => width - ((now - at) / span) * width
  const rates = Samples.publishRate(samples)
  const maxBacklog = Math.max(1, ...samples.map((s) => s.backlog))
  const maxRate = Math.max(1, ...rates.map((r) => r.perSecond))
  const y = (value: number, max: number) => height - 4 - (value / max) * (height - 12)
  const last = samples.at(-1)
  const lastRate = Samples.recentRate(samples, 30_000)
  return `<figure class="chart"><svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="backlog and publish rate">
<rect x="0" y="0" width="${width}" height="${height}" fill="#fafafa" stroke="#ddd"/>
${polyline(
  samples.map((s) => [x(s.at), y(s.backlog, maxBacklog)]),
  "#c0392b"
)}
${polyline(
  rates.map((r) => [x(r.at), y(r.perSecond, maxRate)]),
  "#2471a3"
)}
<text x="6" y="14" font-size="11" fill="#c0392b">backlog (max ${maxBacklog})</text>
<text x="${width - 6}" y="14" font-size="11" fill="#2471a3" text-anchor="end">publish rate /s (max ${maxRate.toFixed(1)})</text>
</svg><figcaption>last ${escapeHtml(Math.round(span / 1000))} s of ${Math.round(windowMillis / 60_000)} min, ${samples.length} samples · backlog now <span data-metric="backlog">${last?.backlog ?? 0}</span> · publishing ${lastRate.toFixed(1)}/s (last 30 s)</figcaption></figure>`
}

/**
 * The stylesheet (served, not inline, so the content security policy can forbid inline styles).
 *
 * @since 0.1.0
 * @category assets
 */
export const css = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fff}
header{display:flex;gap:1.5em;align-items:center;padding:.6em 1em;background:#1f2d3d;color:#fff}
header a{color:#cfe3ff;margin-right:1em;text-decoration:none}header nav{flex:1}
.live{font-size:12px;padding:.1em .5em;border-radius:1em;background:#555}.live.on{background:#1e8449}
main{padding:1em;max-width:1200px}
.banner{margin:0;padding:.5em 1em;background:#fdebd0;border-bottom:1px solid #e59866}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ddd;border-radius:6px;padding:.5em .8em;min-width:7em}
.card b{display:block;font-size:20px}.card.warn{border-color:#e67e22;background:#fef5e7}.card.alert{border-color:#c0392b;background:#fdedec}
.relays{margin:.2em 0 .6em;padding:.5em .8em;border-radius:6px;color:#555}.relays.warn{background:#fef5e7;border:1px solid #e67e22;color:#000}.relays.alert{background:#c0392b;color:#fff;font-weight:bold}
.health ul{list-style:none;padding:0;margin:.2em 0}.health li{padding:.15em .4em}.health li.alert{background:#fdedec;color:#c0392b}.health li.ok b{color:#1e8449}
table{border-collapse:collapse;margin:.4em 0 1em}th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f6f7}td.num{text-align:right}.empty{color:#888}
form.repair label{display:block;margin:.3em 0}form.repair input[type=text],form.repair textarea{width:30em}
button{padding:.35em .9em}.danger{background:#c0392b;color:#fff;border:0;border-radius:4px}
.error{color:#922;background:#fdedec;padding:.5em}.ok{color:#145a32;background:#e9f7ef;padding:.5em}
pre{background:#f4f6f7;padding:.5em;overflow:auto;max-height:20em}
.chart{margin:0 0 1em}.chart svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}
`

/**
 * The script: swaps the overview for each server-sent update, marks the page live, and keeps
 * working (as a plain page) when the stream is unavailable.
 *
 * @since 0.1.0
 * @category assets
 */
export const js = `
(function(){
  document.querySelectorAll("[data-select-all]").forEach(function(box){
    box.addEventListener("change", function(){ document.querySelectorAll("input[name=eventId],input[name=letter]").forEach(function(b){ b.checked = box.checked; }); });
  });
  var overview = document.getElementById("overview");
  var live = document.getElementById("live");
  if (!overview || !window.EventSource) return;
  var source = new EventSource(document.body.dataset.base + "/events");
  source.addEventListener("overview", function(event){ overview.innerHTML = event.data; live.textContent = "live"; live.className = "live on"; });
  source.onerror = function(){ live.textContent = "static"; live.className = "live"; };
})();
`
