/**
 * A bench worker thread, started: `start` returns once the thread has posted its first message
 * (it is ready), with `failed`, which rejects when the thread throws or exits, so that whoever waits
 * on the thread later fails instead of waiting for ever. Used by `writerThread.ts` (the latency
 * benches' writer) and `workerPublisher.ts` (kafkajs on its own thread).
 */
import { Worker } from "node:worker_threads"

export interface Started {
  readonly worker: Worker
  /** Rejects when the thread throws or exits (terminating it included); never resolves. */
  readonly failed: Promise<never>
}

export const start = async (url: URL, workerData: unknown, name: string): Promise<Started> => {
  const worker = new Worker(url, { workerData })
  const failed = new Promise<never>((_, reject) => {
    worker.once("error", reject)
    worker.once("exit", (code) => reject(new Error(`the ${name} exited (code ${code}) before it was done`)))
  })
  failed.catch(() => undefined)
  await Promise.race([new Promise((resolve) => worker.once("message", resolve)), failed])
  return { worker, failed }
}
