/**
 * A service frozen in place (SIGSTOP, as a stuck event loop or a paused container looks from
 * outside): its `/health/ready` stops answering within 15 s (an orchestrator's probe with a 1 s
 * timeout fails), `/health/live` with it (a frozen process is not live: the orchestrator restarts
 * it); its relay heartbeat lapses in the database, which the CLI's `status` and the dashboard
 * read; events enqueued meanwhile wait. Once it thaws (SIGCONT) it is ready again and publishes
 * them.
 */
import { join } from "node:path"
import { ReadModel } from "@effect-outbox/core/ReadModel"
import * as Effect from "effect/Effect"
import { assert, describe, it } from "vitest"
import * as Support from "./support.js"

// Kubernetes' default probe timeout is 1 s: a probe that does not answer within it fails.
const probe = async (port: number, path: string): Promise<number | "no answer"> => {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(1_000) })
    await response.body?.cancel()
    return response.status
  } catch {
    return "no answer"
  }
}

const until = async <A>(read: () => Promise<A>, done: (a: A) => boolean, timeoutMs: number): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() > deadline) return value
    await Support.sleep(250)
  }
}

describe("a frozen service", () => {
  it("not ready (no answer) within 15 s of SIGSTOP, its heartbeat lapses, ready and publishing again after SIGCONT", async () => {
    const schema = Support.uniqueName("freeze")
    const topic = `${schema}.orders`
    await Support.createTopics(Support.sharedBrokers, [topic], 1)
    const stack = await Support.makeStack({ schema })
    const t = await Support.tables(stack)
    const child = Support.spawnNode(join(Support.here, "runtime-relay-process.ts"), {
      FAULTS_SCHEMA: schema,
      KAFKA_BROKERS: Support.sharedBrokers.join(",")
    })
    const pending = async () =>
      (
        await Support.query<{ n: number }>(
          stack,
          `SELECT count(*)::int AS n FROM ${t.message} WHERE status IN ('PENDING','DISPATCHING')`
        )
      )[0]!.n
    const heartbeat = () =>
      stack.runPromise(
        Effect.map(
          ReadModel.use((readModel) => readModel.relays!),
          (relays) => relays.find((r) => r.owner === `frozen-${schema}`)
        )
      )
    try {
      const readyLine = await until(
        async () => child.lines.find((l) => l.startsWith("ready ")),
        (line) => line !== undefined || child.process.exitCode !== null,
        60_000
      )
      assert.isDefined(readyLine, `the service did not start (exit ${child.process.exitCode})`)
      const port = Number(readyLine!.slice("ready ".length))
      assert.strictEqual(
        await until(
          () => probe(port, "/health/ready"),
          (s) => s === 200,
          30_000
        ),
        200
      )
      assert.isTrue((await until(heartbeat, (h) => h?.alive === true, 30_000))?.alive, "a running relay beats")

      assert.isTrue(child.process.kill("SIGSTOP"))
      const frozen = Date.now()
      const unready = await until(
        () => probe(port, "/health/ready"),
        (s) => s !== 200,
        15_000
      )
      const unreadyAfter = Date.now() - frozen
      assert.strictEqual(unready, "no answer")
      assert.isAtMost(unreadyAfter, 15_000, "unready within 15 s of the relay process freezing")
      assert.strictEqual(await probe(port, "/health/live"), "no answer", "a frozen process is not live either")

      // Meanwhile, what the CLI and the dashboard read: events wait, the heartbeat lapses.
      await Support.enqueueMany(stack, topic, 20, { keys: 5 })
      const lapsed = await until(heartbeat, (h) => h?.alive === false, 45_000)
      const lapsedAfter = Date.now() - frozen
      assert.isFalse(lapsed?.alive, "the frozen relay's heartbeat lapses")
      assert.strictEqual(await pending(), 20, "nothing published while frozen")

      assert.isTrue(child.process.kill("SIGCONT"))
      const thawed = Date.now()
      assert.strictEqual(
        await until(
          () => probe(port, "/health/ready"),
          (s) => s === 200,
          30_000
        ),
        200
      )
      const readyAfter = Date.now() - thawed
      assert.strictEqual(await until(pending, (n) => n === 0, 60_000), 0, "it publishes what waited")
      assert.isTrue((await until(heartbeat, (h) => h?.alive === true, 30_000))?.alive, "and beats again")
      console.log(
        `frozen service: unready (no answer) after ${(unreadyAfter / 1000).toFixed(1)} s; heartbeat lapsed after ` +
          `${(lapsedAfter / 1000).toFixed(1)} s; ready ${(readyAfter / 1000).toFixed(1)} s after SIGCONT; 20 events published`
      )
    } finally {
      child.process.kill("SIGCONT")
      child.process.kill("SIGKILL")
      await child.exited
      await Support.dropSchema(stack, schema).catch(() => undefined)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic]).catch(() => undefined)
    }
  }, 240_000)
})
