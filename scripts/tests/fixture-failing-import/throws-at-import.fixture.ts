import { it } from "vitest"

// Fails before any test is collected: vitest reports the file as failed with no test in it.
const failAtImport = (): never => {
  throw new Error("this file fails at import, on purpose")
}
failAtImport()

it("is never collected", () => {})
