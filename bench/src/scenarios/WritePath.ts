/**
 * Scenario 3: the write path. Business transactions (one order row) per second with and without
 * the outbox insert (and its NOTIFY), at 1 / 4 / 16 concurrent clients, interleaved. Both sides
 * use the same pool and the library's Transactor; only the `Outbox.enqueue` differs.
 */
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Report from "../Report.ts"

export interface Options {
  readonly reps: number
  readonly seconds: number
  readonly clients: ReadonlyArray<number>
}

interface Sample {
  readonly tps: number
  readonly cpu: Cpu.CpuUse
}

export const createOrders = (stack: Library.Stack, table: string): Promise<void> =>
  stack.run(
    Library.Effect.gen(function* () {
      const sql = yield* Library.SqlClient.SqlClient
      yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${stack.schema}"."${table}" (
      id uuid PRIMARY KEY, user_id text NOT NULL, amount int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
        .unprepared
    })
  )

export const run = async (options: Options): Promise<void> => {
  console.log(`\n## 3. write path (${options.seconds} s per run, ${options.reps} reps)`)
  const schema = Env.uniqueName("bench_s3")
  const maxClients = Math.max(...options.clients)
  const stack = await Library.makeStack({ schema, pgConnections: maxClients, wake: "listen" })
  await createOrders(stack, "orders")
  const table = `${schema}.orders`
  const topic = "bench-s3-unpublished" // rows are only written, never relayed

  const measure = async (clients: number, outbox: boolean): Promise<Sample> => {
    await Library.truncate(stack)
    let count = 0
    const before = Cpu.snapshot()
    const deadline = performance.now() + options.seconds * 1000
    const started = performance.now()
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        let i = c
        while (performance.now() < deadline) {
          await Library.businessWrite(stack, table, topic, i, outbox)
          i += clients
          count++
        }
      })
    )
    const elapsed = performance.now() - started
    return { tps: (count / elapsed) * 1000, cpu: Cpu.between(before, Cpu.snapshot()) }
  }

  // Warm-up.
  await measure(4, true)
  await measure(4, false)

  const results = new Map<number, { lib: Array<Sample>; base: Array<Sample> }>()
  for (let rep = 0; rep < options.reps; rep++) {
    console.log(`  rep ${rep + 1}/${options.reps}`)
    for (const clients of options.clients) {
      const entry = results.get(clients) ?? { lib: [], base: [] }
      if (rep % 2 === 0) {
        entry.base.push(await measure(clients, false))
        entry.lib.push(await measure(clients, true))
      } else {
        entry.lib.push(await measure(clients, true))
        entry.base.push(await measure(clients, false))
      }
      results.set(clients, entry)
      console.log(
        `    ${clients} clients: with outbox ${Math.round(entry.lib.at(-1)!.tps)} tps, without ${Math.round(entry.base.at(-1)!.tps)} tps`
      )
    }
  }
  for (const [clients, { base, lib }] of results) {
    const row = Report.pair(
      {
        scenario: "3 write path",
        variant: `${clients} client${clients > 1 ? "s" : ""}`,
        unit: "tx/s",
        baselineName: "without outbox",
        target: "≥ 0.9×",
        cpu: { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(base.map((s) => s.cpu)) }
      },
      lib.map((s) => s.tps),
      base.map((s) => s.tps)
    )
    Report.add({ ...row, met: row.ratio!.median >= 0.9 })
  }
  await Library.dropSchema(stack)
  await stack.dispose()
}
