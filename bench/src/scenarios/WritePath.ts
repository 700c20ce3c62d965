/**
 * Scenario 3: the write path. Business transactions (one order row) per second at 1 / 4 / 16
 * concurrent clients, interleaved, three ways on the same pool: without the outbox (the
 * library's Transactor, no event), with `Outbox.enqueue` (the library), and with the same
 * outbox row written by hand through the same `SqlClient` (`Library.handWrite`, the baseline for
 * the library's own overhead: target ≥ 0.9×).
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
  stack.run(Library.createOrdersTable(`"${stack.schema}"."${table}"`))

export const run = async (options: Options): Promise<void> => {
  console.log(`\n## 3. write path (${options.seconds} s per run, ${options.reps} reps)`)
  const schema = Env.uniqueName("bench_s3")
  const maxClients = Math.max(...options.clients)
  const stack = await Library.makeStack({ schema, pgConnections: maxClients, wake: "listen" })
  await createOrders(stack, "orders")
  const table = `${schema}.orders`
  const topic = "bench-s3-unpublished" // rows are only written, never relayed

  type Mode = "plain" | "library" | "hand"
  const measure = async (clients: number, mode: Mode): Promise<Sample> => {
    await Library.truncate(stack)
    let count = 0
    const before = Cpu.snapshot()
    const deadline = performance.now() + options.seconds * 1000
    const started = performance.now()
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        let i = c
        while (performance.now() < deadline) {
          if (mode === "hand") await Library.handWrite(stack, table, topic, i)
          else await Library.businessWrite(stack, table, topic, i, mode === "library")
          i += clients
          count++
        }
      })
    )
    const elapsed = performance.now() - started
    return { tps: (count / elapsed) * 1000, cpu: Cpu.between(before, Cpu.snapshot()) }
  }

  // Warm-up.
  await measure(4, "library")
  await measure(4, "plain")
  await measure(4, "hand")

  const orders: ReadonlyArray<ReadonlyArray<Mode>> = [
    ["plain", "library", "hand"],
    ["library", "hand", "plain"],
    ["hand", "plain", "library"]
  ]
  const results = new Map<number, { lib: Array<Sample>; base: Array<Sample>; hand: Array<Sample> }>()
  for (let rep = 0; rep < options.reps; rep++) {
    console.log(`  rep ${rep + 1}/${options.reps}`)
    for (const clients of options.clients) {
      const entry = results.get(clients) ?? { lib: [], base: [], hand: [] }
      for (const mode of orders[rep % orders.length]!) {
        const sample = await measure(clients, mode)
        ;(mode === "plain" ? entry.base : mode === "library" ? entry.lib : entry.hand).push(sample)
      }
      results.set(clients, entry)
      console.log(
        `    ${clients} clients: library ${Math.round(entry.lib.at(-1)!.tps)} tps, by hand ${Math.round(
          entry.hand.at(-1)!.tps
        )} tps, without outbox ${Math.round(entry.base.at(-1)!.tps)} tps`
      )
    }
  }
  for (const [clients, { base, lib, hand }] of results) {
    const vsHand = Report.pair(
      {
        scenario: "3 write path",
        variant: `${clients} client${clients > 1 ? "s" : ""}, vs same SQL by hand`,
        unit: "tx/s",
        baselineName: "same SQL by hand, same client",
        target: "≥ 0.9×",
        cpu: { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(hand.map((s) => s.cpu)) }
      },
      lib.map((s) => s.tps),
      hand.map((s) => s.tps)
    )
    Report.add({ ...vsHand, met: vsHand.ratio!.median >= 0.9 })
    const row = Report.pair(
      {
        scenario: "3 write path",
        variant: `${clients} client${clients > 1 ? "s" : ""}`,
        unit: "tx/s",
        baselineName: "without outbox",
        target: "info (the targets are vs by hand)",
        cpu: { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(base.map((s) => s.cpu)) }
      },
      lib.map((s) => s.tps),
      base.map((s) => s.tps)
    )
    Report.add(row)
  }
  await Library.dropSchema(stack)
  await stack.dispose()
}
