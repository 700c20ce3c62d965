import { it } from "vitest"

// Fails before any test is collected: vitest reports the file as failed with no test in it.
throw new Error("this file fails at import, on purpose")

it("is never collected", () => {})
