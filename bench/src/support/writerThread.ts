/**
 * The parent's side of `logWriterThread.ts` (the latency benches' writer on a worker thread):
 * `open` starts the thread and waits until its stack is built; `run` then starts the load and
 * hands each transaction's ids, with the time its commit returned, to `onCommitted` until the
 * writer is done. Between the two the caller can start its clocks and monitors.
 */
import type * as Env from "../Env.ts"
import * as Thread from "./thread.ts"

export interface Data {
  readonly slot: string
  readonly topic: string
  readonly rate: number
  readonly seconds: number
  readonly synchronousCommit: "on" | "off" | undefined
}

export interface WriterThread {
  readonly run: (onCommitted: (committed: Env.Committed) => void) => Promise<void>
  readonly close: () => Promise<void>
}

export const open = async (data: Data): Promise<WriterThread> => {
  // A thread that throws, or ends before "done", fails the run instead of leaving it waiting.
  const { worker, failed } = await Thread.start(new URL("./logWriterThread.ts", import.meta.url), data, "writer thread")
  const run = (onCommitted: (committed: Env.Committed) => void) =>
    Promise.race([
      new Promise<void>((resolve) => {
        worker.on("message", (m: Partial<Env.Committed> & { done?: boolean }) => {
          if (m.ids !== undefined) onCommitted(m as Env.Committed)
          if (m.done === true) resolve()
        })
        worker.postMessage("start")
      }),
      failed
    ])
  return { run, close: async () => void (await worker.terminate()) }
}
