import { defineConfig } from "vitest/config"

// Two projects: `unit` needs nothing running (pure modules, in-memory layers, simulation);
// `integration` talks to the real PostgreSQL and Kafka that scripts/services brings up.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: [
            "packages/*/test/**/*.test.ts",
            "examples/*/test/**/*.test.ts",
            // the test scripts' own tests (the summary line)
            "scripts/tests/*.test.ts"
          ],
          exclude: ["**/*.integration.test.ts", "**/*.faults.test.ts", "**/node_modules/**"],
          testTimeout: 60_000
        }
      },
      {
        test: {
          name: "integration",
          include: ["packages/*/test/**/*.integration.test.ts", "examples/*/test/**/*.integration.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // Integration files share one broker and one database server; each test uses its own
          // topics and schema, but two cores cannot run many JVM-backed suites at once.
          maxWorkers: 2
        }
      },
      {
        test: {
          name: "faults",
          include: ["packages/*/test/**/*.faults.test.ts"],
          testTimeout: 600_000,
          hookTimeout: 120_000,
          // Two files at a time: most of a fault file's time is an outage or a stream it waits
          // through. Each worker starts its private brokers and clusters on its own ports
          // (`privatePort` in test/faults/support.ts); the shared broker and database are
          // shared as in the integration project.
          maxWorkers: 2
        }
      }
    ]
  }
})
