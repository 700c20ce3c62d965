// The demo as a specification: on the embedded default (PGlite + the in-memory broker) a small
// run reaches its summary with every guarantee held.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as Demo from "../src/Demo.ts"
import * as Program from "../src/Program.ts"
import * as Progress from "../src/Progress.ts"

describe("demo on the embedded default", () => {
  // Live clock: the relay polls and the consumer retries on real time.
  it.live(
    "runs to a summary with no loss, exactly-once effects and the poison record dead-lettered",
    () =>
      Effect.gen(function* () {
        const output: Array<string> = []
        const summary = yield* Program.runDemo({
          selection: { databaseUrl: undefined, kafkaBrokers: undefined },
          orders: 30,
          rollbackEvery: 5,
          flakyEvery: 4,
          poison: 2,
          customers: 3,
          write: (text) => void output.push(text),
          progress: { tty: false, interval: "200 millis" }
        }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

        const text = output.join("")
        assert.include(text, "database: embedded PostgreSQL (PGlite")
        assert.include(text, "broker:   in-memory broker")
        assert.deepStrictEqual(summary.problems, [])
        // 30 orders, every 5th declined: 24 committed, 6 rolled back; plus 2 poison records.
        assert.strictEqual(summary.ordersCommitted, 24)
        assert.strictEqual(summary.rolledBack, 6)
        assert.strictEqual(summary.eventsCommitted, 26)
        assert.strictEqual(summary.published, 26)
        assert.strictEqual(summary.missingOnBroker, 0)
        assert.strictEqual(summary.phantomEvents, 0)
        assert.strictEqual(summary.processed, 24)
        assert.strictEqual(summary.invoices, 24)
        assert.strictEqual(summary.duplicateInvoices, 0)
        assert.strictEqual(summary.missingInvoices, 0)
        assert.strictEqual(summary.orderViolations, 0)
        assert.strictEqual(summary.deadLettered, 2)
        assert.strictEqual(summary.poisonDeadLettered, 2)
        assert.strictEqual(summary.deadLettersOnTopic, 2)
        // Billing committed every record, the poison ones included: no consumer lag.
        assert.strictEqual(summary.consumerLag, 0)
        assert.include(text, "consumer lag           0 records")
        assert.match(text, /\| consumer lag \d+\n/)
        // Every 4th order failed once and was retried (the declined ones never reached billing).
        assert.isAtLeast(summary.retries, 1)
        assert.include(text, "OK: no loss")
      }),
    { timeout: 240_000 }
  )
})

describe("progress display", () => {
  const snapshot: Progress.Snapshot = {
    enqueued: 12,
    rolledBack: 3,
    published: 10,
    processed: 8,
    deadLettered: 1,
    unfinished: 3,
    consumerLag: 5,
    elapsedMillis: 2500
  }

  it("renders every counter and both lags on one line", () => {
    assert.strictEqual(
      Progress.render(snapshot, 20),
      "[  2.5s] enqueued 12 (+3 rolled back) of 20 | published 10 | processed 8 | dead-lettered 1 | unfinished 3 | consumer lag 5"
    )
    assert.include(Progress.render({ ...snapshot, consumerLag: undefined }), "| consumer lag ?")
  })

  it.live("rewrites one line on a terminal and prints lines otherwise", () =>
    Effect.gen(function* () {
      const tty: Array<string> = []
      const plain: Array<string> = []
      const sample = Effect.succeed(snapshot)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const a = yield* Progress.start({ sample, tty: true, write: (t) => void tty.push(t), interval: "10 millis" })
          const b = yield* Progress.start({
            sample,
            tty: false,
            write: (t) => void plain.push(t),
            interval: "10 millis"
          })
          yield* Effect.sleep("50 millis")
          yield* a.finish
          yield* b.finish
        })
      )
      assert.isTrue(tty.every((chunk) => chunk.startsWith("\r\x1b[2K")))
      assert.isTrue(tty.at(-1)!.endsWith("\n"))
      // Unchanged samples are not repeated in a log: the first line and the final one.
      assert.strictEqual(plain.length, 2)
      assert.isTrue(plain.every((line) => line.endsWith("\n") && !line.includes("\r")))
    })
  )

  it("the summary says OK only when no problem was found", () => {
    const base: Demo.Summary = {
      ordersAttempted: 1,
      ordersCommitted: 1,
      rolledBack: 0,
      eventsCommitted: 1,
      published: 1,
      processed: 1,
      deadLettered: 0,
      publishFailed: 0,
      unfinished: 0,
      consumerLag: 0,
      invoices: 1,
      duplicateInvoices: 0,
      missingInvoices: 0,
      phantomInvoices: 0,
      phantomEvents: 0,
      missingOnBroker: 0,
      recordsOnTopic: 1,
      deadLettersOnTopic: 0,
      poisonDeadLettered: 0,
      orderViolations: 0,
      retries: 0,
      elapsedMillis: 10,
      problems: []
    }
    assert.include(Demo.renderSummary(base), "OK:")
    const broken = Demo.renderSummary({ ...base, duplicateInvoices: 1, problems: ["1 duplicate invoices"] })
    assert.include(broken, "FAILED:")
    assert.include(broken, "1 duplicate invoices")
  })
})
