/**
 * What-if (not part of `pnpm bench`): where the write path's library overhead is, one client,
 * sequential transactions, modes interleaved in short slices on one stack:
 *   hand     order row + a plain `INSERT … VALUES` of the outbox row (`Library.handWrite`)
 *   store    order row + `OutboxStore.insert` (the unnest statement) in `sql.withTransaction`
 *   library  order row + `Outbox.enqueue` in the Transactor (`Library.businessWrite`)
 *   polling  the same on a stack without wake-ups (`WakeUp.layerPollingOnly`): the wake-up's share
 *
 *   node bench/src/experiments/WritePathOverhead.ts [--slices 6] [--slice-ms 1500] [--clients 1]
 *     [--modes hand,library]   (the first mode is the reference; `node --cpu-prof` on one mode profiles it)
 */
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { createOrders } from "../scenarios/WritePath.ts"

const SLICES = Args.number("slices", 6)
const SLICE_MS = Args.number("slice-ms", 1500)
const CLIENTS = Args.number("clients", 1)

type Mode = "hand" | "store" | "library" | "polling"

const modes: ReadonlyArray<Mode> = Args.list("modes", "hand,store,library,polling") as Array<Mode>

const storeWrite = (stack: Library.Stack, table: string, topic: string, i: number) =>
  stack.run(Library.storeWriteTx(table, topic, i))

const main = async () => {
  const schema = Env.uniqueName("wp_overhead")
  const stack = await Library.makeStack({ schema, pgConnections: Math.max(4, CLIENTS + 1), wake: "listen" })
  const quiet = await Library.makeStack({ schema, pgConnections: Math.max(4, CLIENTS + 1), wake: "poll" })
  await createOrders(stack, "orders")
  const table = `${schema}.orders`
  const topic = "bench-wp-overhead"
  const totals = new Map<Mode, { n: number; ms: number; cpuUs: number }>(
    modes.map((m) => [m, { n: 0, ms: 0, cpuUs: 0 }])
  )
  const slice = async (mode: Mode) => {
    const cpu = process.cpuUsage()
    const started = performance.now()
    const deadline = started + SLICE_MS
    let n = 0
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        let i = c
        while (performance.now() < deadline) {
          if (mode === "hand") await Library.handWrite(stack, table, topic, i)
          else if (mode === "store") await storeWrite(stack, table, topic, i)
          else await Library.businessWrite(mode === "polling" ? quiet : stack, table, topic, i, true)
          i += CLIENTS
          n++
        }
      })
    )
    const t = totals.get(mode)!
    t.n += n
    t.ms += performance.now() - started
    const used = process.cpuUsage(cpu)
    t.cpuUs += used.user + used.system
  }
  for (const m of modes) await slice(m) // warm-up
  for (const m of modes) totals.set(m, { n: 0, ms: 0, cpuUs: 0 })
  for (let s = 0; s < SLICES; s++) {
    for (let k = 0; k < modes.length; k++) await slice(modes[(s + k) % modes.length]!)
  }
  const rate = (m: Mode) => (totals.get(m)!.n / totals.get(m)!.ms) * 1000
  // node CPU per transaction: the client side's own cost, less sensitive to a loaded server
  const cpuPerTx = (m: Mode) => totals.get(m)!.cpuUs / totals.get(m)!.n
  for (const m of modes) {
    console.log(
      `${m}: ${Math.round(rate(m))} tx/s (×${(rate(m) / rate(modes[0]!)).toFixed(2)} of ${modes[0]}); node CPU ${Math.round(
        cpuPerTx(m)
      )} µs/tx (${(cpuPerTx(m) - cpuPerTx(modes[0]!)).toFixed(0)} µs over ${modes[0]})`
    )
  }
  await Library.dropSchema(stack)
  await stack.dispose()
  await quiet.dispose()
  void Outbox
  process.exit(0)
}
main()
