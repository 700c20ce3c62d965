/**
 * The log relay draining a backlog, next to the raw client it publishes through, on both Kafka
 * adapters: `pnpm bench`'s scenario 6 (scenarios/LogRelayThroughput.ts) with its sizes as options.
 * Needs a wal_level=logical PostgreSQL at LOGICAL_DATABASE_URL (`scripts/services pg-private up`)
 * and Kafka at KAFKA_BROKERS.
 *
 *   node bench/src/experiments/LogRelay.ts [--reps 3] [--backlog 50000] [--batch 100] [--per-tx 1000]
 *     [--clients kafkajs,platformatic]
 *
 * `--per-tx`: events per writing transaction. `--batch`: the relay's `batchSize` (its window
 * grows to 8× that while a backlog lasts). Prints the rows and their JSON.
 */

import { loadavg } from "node:os"
import * as Args from "../Args.ts"
import * as Report from "../Report.ts"
import * as LogRelayThroughput from "../scenarios/LogRelayThroughput.ts"

await LogRelayThroughput.run({
  reps: Args.number("reps", 3),
  backlog: Args.number("backlog", 50_000),
  batchSize: Args.number("batch", 100),
  perTx: Args.number("per-tx", 1000),
  clients: Args.list("clients", "kafkajs,platformatic") as ReadonlyArray<LogRelayThroughput.Client>
})
console.log(`\n${Report.markdown()}\n`)
console.log(JSON.stringify({ loadavg: loadavg().map((l) => Number(l.toFixed(1))) }))
process.exit(0)
