/**
 * `OUTBOX_*` variables that nothing in this process reads, reported once at start: a mistyped
 * name (`OUTBOX_RELAY_BATCHSIZE`) otherwise silently means the default.
 */
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as EnvVariable from "../../EnvVariable.ts"

const prefix = "OUTBOX"

// Environment providers nest names at "_" (OUTBOX -> RELAY -> BATCH -> SIZE), flat ones do not;
// walking the tree and joining the path with "_" gives the variable names either way.
const namesUnder = (
  provider: ConfigProvider.ConfigProvider,
  path: ReadonlyArray<string>,
  depth: number
): Effect.Effect<ReadonlyArray<string>, ConfigProvider.SourceError> =>
  Effect.gen(function* () {
    const node = yield* provider.load(path)
    if (node === undefined) return []
    const here = path.join("_")
    if (node._tag === "Value") return [here]
    if (node._tag !== "Record" || depth > 8) return []
    const below = yield* Effect.forEach([...node.keys], (key) => namesUnder(provider, [...path, key], depth + 1))
    return [...(node.value === undefined ? [] : [here]), ...below.flat()]
  })

/** The `OUTBOX_*` names the current `ConfigProvider` holds. */
export const outboxNames: Effect.Effect<ReadonlyArray<string>, ConfigProvider.SourceError> = Effect.gen(function* () {
  const provider = yield* ConfigProvider.ConfigProvider
  const root = yield* provider.load([])
  if (root === undefined || root._tag !== "Record") return []
  const tops = [...root.keys].filter((key) => key === prefix || key.startsWith(`${prefix}_`))
  const names = yield* Effect.forEach(tops, (key) => namesUnder(provider, [key], 0))
  return [...new Set(names.flat())].filter((name) => name.startsWith(`${prefix}_`)).sort()
})

const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The closest known name, when it is close enough to be the intended one. */
export const closest = (name: string, known: Iterable<string>): string | undefined => {
  let best: { readonly name: string; readonly distance: number } | undefined
  for (const candidate of known) {
    const d = distance(name, candidate)
    if (best === undefined || d < best.distance) best = { name: candidate, distance: d }
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(name.length / 4)) ? best.name : undefined
}

/** One warning naming every unread `OUTBOX_*` variable and, for each, the known name it resembles. */
export const warnUnknown: Effect.Effect<void> = Effect.gen(function* () {
  const known = EnvVariable.knownNames()
  const unknown = (yield* outboxNames).filter((name) => !known.has(name))
  if (unknown.length === 0) return
  const described = unknown.map((name) => {
    const near = closest(
      name,
      [...known].filter((k) => k.startsWith(`${prefix}_`))
    )
    return near === undefined ? name : `${name} (did you mean ${near}?)`
  })
  yield* Effect.logWarning(
    `environment variable${unknown.length === 1 ? "" : "s"} nothing in this process reads: ${described.join(", ")}; ` +
      `a mistyped name silently means the default (every variable: docs/configuration.md)`
  )
}).pipe(Effect.catch(() => Effect.void))
