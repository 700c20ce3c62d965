// The dashboard's pages as pure renderings: hostile values are escaped, repair links follow the
// read-only switch, and the chart's publish rate never goes negative.
import { assert, describe, it } from "@effect/vitest"
import * as Pages from "../src/DashboardPages.ts"
import * as Samples from "../src/DashboardSamples.ts"
import type * as Operations from "../src/Operations.ts"

const hostile = `<script>alert("x")</script>`

const status: Operations.Status = {
  now: 1_800_000_000_000,
  total: 1,
  byStatus: { FAILURE: 1 },
  oldestPendingAgeMillis: null,
  staleLeases: 0,
  blockedKeys: 1,
  failures: [
    { id: "01a23c25-a297-7b48-8292-3d8fa51089b1", topic: hostile, key: hostile, attempts: 3, lastError: hostile }
  ],
  topics: [
    {
      topic: hostile,
      byStatus: { FAILURE: 1 },
      oldestPendingCreatedAt: null,
      staleLeases: 0,
      oldestPendingAgeMillis: null
    }
  ],
  stuckProcessing: { stuckAfterMillis: 900_000, rows: [] }
}

const render = (readOnly: boolean) =>
  Pages.overview({
    base: "/ops",
    status,
    broker: { _tag: "Unavailable", reason: hostile },
    samples: [],
    windowMillis: 600_000,
    readOnly
  })

describe("dashboard pages", () => {
  it("escapes every value from the outbox (topic, key, error) and from the broker", () => {
    const html = render(false)
    assert.notInclude(html, "<script>")
    assert.include(html, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
  })

  it("offers repair links only when not read-only, under the mount prefix", () => {
    assert.include(render(false), `href="/ops/repairs?action=requeue&amp;ids=01a23c25-a297-7b48-8292-3d8fa51089b1"`)
    assert.notInclude(render(true), "/repairs?")
  })

  it("the chart's publish rate is never negative (a purge lowers the published count)", () => {
    const samples = [
      Samples.fromCounts(0, { PUBLISHED: 10, SUCCESS: 5 }),
      Samples.fromCounts(1000, { PUBLISHED: 4, PENDING: 2 }),
      Samples.fromCounts(3000, { PUBLISHED: 10, DISPATCHING: 1 })
    ]
    assert.deepStrictEqual(
      Samples.publishRate(samples).map((r) => r.perSecond),
      [0, 3]
    )
    assert.deepStrictEqual(
      samples.map((s) => s.backlog),
      [0, 2, 1]
    )
    // Over the last 2.5 s: from the sample at 1000 to the one at 3000, 6 publishes in 2 s.
    assert.strictEqual(Samples.recentRate(samples, 2500), 3)
    assert.strictEqual(Samples.recentRate(samples.slice(0, 1), 2500), 0)
    const kept = samples.reduce<ReadonlyArray<Samples.Sample>>((all, s) => Samples.append(all, s, 2500), [])
    assert.deepStrictEqual(
      kept.map((s) => s.at),
      [1000, 3000]
    )
  })
})
