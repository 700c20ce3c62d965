import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { runConsumerScenario, type WrongConfiguration } from "./support/consumerSimulation.ts"

// SIM_SEEDS=n runs more scenarios; SIM_SEED=s replays exactly one (and prints its summary);
// every seed also rolls the faults of the real services (database and broker outages,
// partition growth, rebalances, a loading coordinator; see docs/testing.md); SIM_FAULTS=classic
// leaves them out. SIM_WRONG=latest-reset | driver-sql-errors replays a seed with a pre-fix
// behaviour (H4, H2; ConsumerSimulationFaults.test.ts finds such seeds).
const faults = process.env.SIM_FAULTS === "classic" ? "classic" : "production"
const wrongs: ReadonlyArray<WrongConfiguration> = ["latest-reset", "driver-sql-errors"]
const wrong = wrongs.find((w) => w === process.env.SIM_WRONG)
const only = process.env.SIM_SEED === undefined ? undefined : Number(process.env.SIM_SEED)
const count = Number(process.env.SIM_SEEDS ?? 1000)
const seeds = only !== undefined ? [only] : Array.from({ length: count }, (_, i) => i + 1)

describe("consumer simulation (crashes between DB commit and offset commit, duplicates, poison)", () => {
  it.effect(
    `${seeds.length} seeded scenarios (${faults} faults${wrong === undefined ? "" : `, wrong ${wrong}`}): effects exactly once, nothing lost or skipped, only poison in the DLT`,
    () =>
      Effect.gen(function* () {
        const failed: Array<string> = []
        const verbose = only !== undefined || process.env.SIM_VERBOSE !== undefined
        for (const seed of seeds) {
          const started = Date.now()
          const outcome = yield* runConsumerScenario(seed, { faults, ...(wrong === undefined ? {} : { wrong }) })
          if (verbose) console.log(`${outcome.summary} [${Date.now() - started} ms]`)
          if (outcome.violations.length > 0) {
            failed.push(
              `${outcome.summary}\n  ${outcome.violations.slice(0, 5).join("\n  ")}\n(replay: SIM_SEED=${seed}${wrong === undefined ? "" : ` SIM_WRONG=${wrong}`})`
            )
          }
        }
        assert.deepStrictEqual(failed, [], failed.slice(0, 3).join("\n\n"))
      }),
    // Up to a second a seed: room on a loaded machine, and SIM_SEEDS=100000 is not cut short.
    { timeout: Math.max(600_000, seeds.length * 1_000) }
  )

  it.effect(
    `${seeds.length} seeded scenarios with key concurrency (${faults} faults): no key runs two handlers at once, effects in offset order per key, exactly once`,
    () =>
      Effect.gen(function* () {
        const failed: Array<string> = []
        const verbose = only !== undefined || process.env.SIM_VERBOSE !== undefined
        for (const seed of seeds) {
          const started = Date.now()
          const outcome = yield* runConsumerScenario(seed, { faults, keyConcurrency: true })
          if (verbose) console.log(`${outcome.summary} [${Date.now() - started} ms]`)
          if (outcome.violations.length > 0) {
            failed.push(
              `${outcome.summary}\n  ${outcome.violations.slice(0, 5).join("\n  ")}\n(replay: SIM_SEED=${seed}, key concurrency)`
            )
          }
        }
        assert.deepStrictEqual(failed, [], failed.slice(0, 3).join("\n\n"))
      }),
    { timeout: Math.max(600_000, seeds.length * 1_000) }
  )

  it.effect("a seed replays to the same outcome", () =>
    Effect.gen(function* () {
      for (const seed of [7, 42, 1234]) {
        const a = yield* runConsumerScenario(seed, { faults })
        const b = yield* runConsumerScenario(seed, { faults })
        assert.strictEqual(a.fingerprint, b.fingerprint, `seed ${seed} is not deterministic`)
        const c = yield* runConsumerScenario(seed, { faults, keyConcurrency: true })
        const d = yield* runConsumerScenario(seed, { faults, keyConcurrency: true })
        assert.strictEqual(c.fingerprint, d.fingerprint, `seed ${seed} with key concurrency is not deterministic`)
      }
    })
  )
})
