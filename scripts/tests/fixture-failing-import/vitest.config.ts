import { defineConfig } from "vitest/config"

// A tiny project for scripts/tests/summary.test.ts: one file that passes, one that throws at import.
export default defineConfig({ test: { include: ["*.fixture.ts"] } })
