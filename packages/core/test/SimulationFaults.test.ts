// Proof that the relay simulation's production faults bite: with the in-memory
// broker's record-batch size limit and bursts of large records on a hot key, the checker catches
// the publisher before the fix of C1 (one record batch per partition per call, a size error
// failing every record of the call), selected as a deliberately wrong broker model, with a
// replayable seed; the same seed passes with the library's behaviour (split under the limit).
import { assert, describe, it } from "@effect/vitest"
import * as OutboxInvariants from "@effect-outbox/testing/OutboxInvariants"
import * as Effect from "effect/Effect"
import { goodRelay, runScenario } from "./support/simulation.ts"

const SEEDS = 100

describe("relay simulation with production faults: the checker catches the pre-fix behaviours", () => {
  it.effect(
    "C1: one record batch per partition per call sends records that fit to FAILURE",
    () =>
      Effect.gen(function* () {
        const isC1 = (finding: string) => finding.includes("MESSAGE_TOO_LARGE")
        const wrong = { faults: "production", wrongBroker: "whole-call-batch" } as const
        let caught: { seed: number; found: string; summary: string; fingerprint: string } | undefined
        for (let seed = 1; seed <= SEEDS && caught === undefined; seed++) {
          const outcome = yield* runScenario(seed, goodRelay, wrong)
          const found = outcome.findings.find(isC1)
          if (found !== undefined) caught = { seed, found, summary: outcome.summary, fingerprint: outcome.fingerprint }
        }
        assert.isDefined(caught, `no seed in 1..${SEEDS} exposed the whole-call record batch`)
        const { fingerprint, found, seed, summary } = caught!
        console.log(`C1 caught: SIM_SEED=${seed} SIM_WRONG=whole-call-batch (${found})\n  ${summary}`)
        assert.include(summary, "oversized")
        const again = yield* runScenario(seed, goodRelay, wrong)
        assert.strictEqual(again.fingerprint, fingerprint, `seed ${seed} did not replay`)
        // The library's behaviour on the same seed: batches under the limit, nothing to find.
        const right = yield* runScenario(seed, goodRelay, { faults: "production" })
        assert.deepStrictEqual(right.findings, [], right.summary)
        assert.deepStrictEqual(right.violations, [], OutboxInvariants.format(right.violations, 5))
      }),
    { timeout: 120_000 }
  )
})
