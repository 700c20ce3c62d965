/**
 * A log relay as its own process, for the SIGKILL fault test: `LogRelay.run` with the library's
 * defaults on the slot `FAULTS_LOG_SLOT` of the logical cluster (LOGICAL_DATABASE_URL), until
 * killed. Prints "ready" once its layers are built; its database sessions are named
 * `FAULTS_APP_NAME`, so the test can see which process holds the slot's lease. `FAULTS_KAFKA`:
 * the Kafka adapter (`kafkajs`, the default, or `platformatic`). `FAULTS_LIVE_MEMORY` (with
 * `node --expose-gc`): every 250 ms a full collection, then the live memory (heap used and array
 * buffers, MiB) printed as `live <n>`: what the process holds, whatever the collector's pace.
 */
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Support from "./support.ts"

const slot = process.env.FAULTS_LOG_SLOT
if (slot === undefined) throw new Error("FAULTS_LOG_SLOT is required")

const kafka = process.env.FAULTS_KAFKA === "platformatic" ? "platformatic" : "kafkajs"
const stack = await Support.makeLogStack({
  slot,
  kafka,
  applicationName: process.env.FAULTS_APP_NAME ?? "log-relay-process"
})
const gc = (globalThis as { gc?: () => void }).gc
if (process.env.FAULTS_LIVE_MEMORY !== undefined && gc !== undefined) {
  setInterval(() => {
    gc()
    const m = process.memoryUsage()
    process.stdout.write(`live ${Math.round((m.heapUsed + m.arrayBuffers) / 1_048_576)}\n`)
  }, 250).unref()
}
process.stdout.write("ready\n")
await stack.runPromise(LogRelay.run())
