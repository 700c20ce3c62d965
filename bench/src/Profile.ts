/**
 * A V8 CPU profile of chosen stretches of this process (the drains, not the set-up), and this
 * process's CPU time, for the experiments that ask where a relay's CPU per event goes. Profiles
 * are written as `<dir>/<name>.cpuprofile`, read by `experiments/cpuProfileSummary.ts` or a
 * browser's profiler.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"

/** This process's user + system CPU so far, in µs. */
export const cpuMicros = (): number => {
  const u = process.cpuUsage()
  return u.user + u.system
}

export interface Profiler {
  /** Starts sampling (nothing without a directory). */
  readonly start: () => Promise<void>
  /** Stops sampling and writes `<dir>/<name>.cpuprofile` (nothing without a directory). */
  readonly stop: (name: string) => Promise<void>
}

/** A profiler writing to `dir`, sampling every 200 µs; a no-op one when `dir` is undefined. */
export const make = async (dir: string | undefined): Promise<Profiler> => {
  if (dir === undefined) return { start: async () => {}, stop: async () => {} }
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.setSamplingInterval", { interval: 200 })
  return {
    start: async () => {
      await session.post("Profiler.start")
    },
    stop: async (name) => {
      const { profile } = await session.post("Profiler.stop")
      writeFileSync(`${dir}/${name}.cpuprofile`, JSON.stringify(profile))
    }
  }
}
