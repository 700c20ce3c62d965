// Proof that the production faults bite: the consumer simulation, with the faults
// of the real services rolled, catches each pre-fix behaviour selected as a deliberately wrong
// configuration, with a replayable seed (the wrong configurations keep these tests meaningful
// once the fixes land: they restore the pre-fix behaviour on purpose).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type Outcome, runConsumerScenario, type WrongConfiguration } from "./support/consumerSimulation.ts"

const SEEDS = 60

/** The first seed whose run with `wrong` shows a violation `matches` accepts. */
const firstCatch = (wrong: WrongConfiguration, matches: (violation: string) => boolean) =>
  Effect.gen(function* () {
    for (let seed = 1; seed <= SEEDS; seed++) {
      const outcome = yield* runConsumerScenario(seed, { faults: "production", wrong })
      const found = outcome.violations.find(matches)
      if (found !== undefined) return { seed, found, outcome }
    }
    return undefined
  })

const replays = (seed: number, wrong: WrongConfiguration, first: Outcome) =>
  Effect.gen(function* () {
    const again = yield* runConsumerScenario(seed, { faults: "production", wrong })
    assert.strictEqual(again.fingerprint, first.fingerprint, `seed ${seed} did not replay`)
  })

describe("consumer simulation with production faults: the checker catches the pre-fix behaviours", () => {
  it.effect("a seed with production faults replays exactly", () =>
    Effect.gen(function* () {
      for (const seed of [4, 13, 22]) {
        const first = yield* runConsumerScenario(seed, { faults: "production" })
        const second = yield* runConsumerScenario(seed, { faults: "production" })
        assert.include(first.summary, "database out")
        assert.strictEqual(second.fingerprint, first.fingerprint, `seed ${seed} did not replay`)
      }
    })
  )

  it.effect(
    "H4: a group that resets to latest skips the records of partitions it had no offset for",
    () =>
      Effect.gen(function* () {
        const isSkip = (v: string) => v.startsWith("skipped:")
        const caught = yield* firstCatch("latest-reset", isSkip)
        assert.isDefined(caught, `no seed in 1..${SEEDS} exposed the latest reset`)
        console.log(`H4 caught: SIM_SEED=${caught!.seed} (${caught!.found})\n  ${caught!.outcome.summary}`)
        yield* replays(caught!.seed, "latest-reset", caught!.outcome)
        const right = yield* runConsumerScenario(caught!.seed, { faults: "production" })
        assert.isUndefined(right.violations.find(isSkip), "earliest reset skipped records too")
      }),
    { timeout: 60_000 }
  )

  it.effect(
    "H2: classifying database errors by the driver alone dead-letters healthy records while PostgreSQL shuts down",
    () =>
      Effect.gen(function* () {
        // 57P03 / 57P01 taken as permanent: dead-lettered at once, not after the retry budget.
        const isMisclassified = (v: string) => v.startsWith("healthy event") && /\(permanent, .*57P0[13]/.test(v)
        const caught = yield* firstCatch("driver-sql-errors", isMisclassified)
        assert.isDefined(caught, `no seed in 1..${SEEDS} exposed the driver-only classification`)
        console.log(`H2 caught: SIM_SEED=${caught!.seed} (${caught!.found})\n  ${caught!.outcome.summary}`)
        yield* replays(caught!.seed, "driver-sql-errors", caught!.outcome)
      }),
    { timeout: 60_000 }
  )
})
