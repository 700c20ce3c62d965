// `pnpm demo` serves the operator dashboard while it runs: on the embedded default the run prints
// a loopback address, and the page answers there (asked as soon as the address is printed).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as Program from "../src/Program.ts"

describe("demo with the dashboard", () => {
  it.live("prints the dashboard's loopback address, and the overview answers there during the run", () =>
    Effect.gen(function* () {
      const output: Array<string> = []
      let overview: Promise<{ status: number; body: string }> | undefined
      const summary = yield* Program.runDemo({
        selection: { databaseUrl: undefined, kafkaBrokers: undefined },
        orders: 100,
        dashboardPort: 0,
        write: (text) => {
          output.push(text)
          const address = /^dashboard: (http:\/\/127\.0\.0\.1:\d+)\//.exec(text)?.[1]
          if (address !== undefined && overview === undefined) {
            overview = fetch(`${address}/`).then(async (r) => ({ status: r.status, body: await r.text() }))
          }
        },
        progress: { tty: false, interval: "200 millis" }
      }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))
      assert.deepStrictEqual(summary.problems, [])
      assert.isDefined(overview, output.join(""))
      const page = yield* Effect.promise(() => overview!)
      assert.strictEqual(page.status, 200)
      assert.include(page.body, `data-count="PENDING"`)
    })
  )
})
