/**
 * The overview's health list: the deployment's checks (`Operations.healthOf`), each with its
 * verdict, so the page says in words what the colours mean.
 */
import type * as Health from "@effect-outbox/core/Health"
import { escapeHtml } from "../../DashboardHtml.ts"

/** The checks as a list; the section is marked `data-health="ok"` or `"failing"`. */
export const render = (report: Health.Report): string => {
  const items = report.checks
    .map(
      (c) =>
        `<li class="${c.ok ? "ok" : "alert"}" data-check="${escapeHtml(c.name)}" data-ok="${c.ok}">` +
        `<b>${c.ok ? "ok" : "failing"}</b> ${escapeHtml(c.name)}: ${escapeHtml(c.detail)}</li>`
    )
    .join("")
  return `<section class="health" data-health="${report.ok ? "ok" : "failing"}"><h2>Health</h2><ul>${items}</ul></section>`
}
