// A hot key: one key with a backlog of large events, so that one relay
// claim holds more than a megabyte for one partition — over Kafka's default max.message.bytes.
// Library defaults throughout (relay, publisher, outbox limit). Before the fix the broker refused
// the whole partition batch with MESSAGE_TOO_LARGE and every record of the call went to FAILURE.

import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import * as Relay from "@effect-outbox/core/Relay"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

describe("a hot key: 200 events of 12 KB on one key among 200 other keys, as a backlog", () => {
  it("all published with the default settings: 0 FAILURE, 0 lost, per-key order kept", async () => {
    const hot = 200
    const others = 400 // two events for each of 200 other keys
    const schema = Support.uniqueName("faults_hotkey")
    const topic = Support.uniqueName("faults-hotkey")
    await Support.createTopics(Support.sharedBrokers, [topic])
    const stack = await Support.makeDefaultsStack({ schema })
    const t = await Support.tables(stack)
    let stopRelay: (() => Promise<void>) | undefined
    try {
      // The backlog: the hot key's events with another key's event after every tenth, then the
      // rest of the other keys. A default claim (100 rows) then holds ~91 hot events: ~1.1 MB on
      // the hot key's partition, shared with the other keys that hash there.
      const drafts: Array<OutboxDraft> = []
      let other = 0
      const nextOther = () => {
        const index = other++
        drafts.push({ topic, key: `k${index % 200}`, payload: Support.payloadOf({ index, pad: "o".repeat(200) }) })
      }
      for (let i = 0; i < hot; i++) {
        drafts.push({ topic, key: "hot", payload: Support.payloadOf({ index: i, pad: "h".repeat(12_000) }) })
        if (i % 10 === 9) nextOther()
      }
      while (other < others) nextOther()
      const ids = await stack.runPromise(
        Effect.gen(function* () {
          const out: Array<string> = []
          for (let i = 0; i < drafts.length; i += 100) {
            out.push(...(yield* Outbox.withTransaction(Outbox.enqueue(drafts.slice(i, i + 100)))))
          }
          return out
        })
      )

      const started = Date.now()
      const scope = await stack.runPromise(Scope.make())
      stopRelay = () => stack.runPromise(Scope.close(scope, Exit.void))
      await stack.runPromise(Relay.start().pipe(Scope.provide(scope)))
      const open = async () =>
        (
          await Support.query<{ n: number }>(
            stack,
            `SELECT count(*)::int AS n FROM ${t.message} WHERE status IN ('PENDING','DISPATCHING')`
          )
        )[0]!.n
      const deadline = Date.now() + 120_000
      while ((await open()) > 0 && Date.now() < deadline) await Support.sleep(250)
      const drainMillis = Date.now() - started
      await stopRelay()

      const statuses = await Support.query<{ status: string; n: number }>(
        stack,
        `SELECT status, count(*)::int AS n FROM ${t.message} GROUP BY status ORDER BY status`
      )
      const failures = statuses.find((s) => s.status === "FAILURE")?.n ?? 0
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: drafts[i]!.key ?? null })),
        records
      )
      Support.record({
        scenario: "hot key, 12 KB x 200 (defaults)",
        ...v,
        failureRows: failures,
        note: `drained in ${(drainMillis / 1000).toFixed(1)} s`
      })
      // When a row did end FAILURE, the assertion says why (the relay's recorded error).
      const why = await Support.query<{ last_error: string | null }>(
        stack,
        `SELECT DISTINCT last_error FROM ${t.message} WHERE status = 'FAILURE' LIMIT 3`
      )
      assert.deepStrictEqual(
        statuses.map((s) => [s.status, s.n]),
        [["PUBLISHED", hot + others]],
        `every row ends PUBLISHED: none FAILURE, none left behind (${why.map((w) => w.last_error).join("; ")})`
      )
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(v.duplicatesDelivered, 0, "no fault beyond the size: nothing is sent twice")
    } finally {
      await stopRelay?.()
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
