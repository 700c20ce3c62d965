/**
 * The environment variables of effect-outbox, each declared once: its name, type, default and
 * meaning, and the `Config` that reads it is built from that declaration. The modules' `config`s
 * are built from their tables, the reference page (`docs/configuration.md`) is generated from
 * them, and the runtime warns at start about `OUTBOX_*` variables no table declares (a typo
 * otherwise silently means the default).
 *
 * Adding a variable is one line in its module's table:
 *
 * ```ts
 * const variables = EnvVariable.table({ package: "adapter-kafka", title: "Kafka client" }, {
 *   connectTimeout: EnvVariable.duration("KAFKA_CONNECT_TIMEOUT", "10 seconds", "how long start-up waits for a broker")
 * })
 * // then read it with variables.connectTimeout.config, and run `pnpm config:docs`
 * ```
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"

/**
 * One variable: what the reference page says of it, and the `Config` that reads it.
 *
 * @since 0.1.0
 * @category models
 */
export interface EnvVariable<A> {
  readonly name: string
  /** As the reference page shows it: `boolean`, `integer`, `duration`, `` `a` \| `b` ``, … */
  readonly type: string
  /** As the reference page shows it: the default value, `required`, or what absence means. */
  readonly default: string
  readonly description: string
  readonly config: Config.Config<A>
}

/**
 * A variable with a default: `value` is that default, typed, for the modules' `defaults`.
 *
 * @since 0.1.0
 * @category models
 */
export interface WithDefault<A> extends EnvVariable<A> {
  readonly value: A
}

/**
 * Where a table's variables appear on the reference page.
 *
 * @since 0.1.0
 * @category models
 */
export interface Section {
  /** The package, e.g. `core`, `adapter-pg`. */
  readonly package: string
  readonly title: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Declared {
  readonly section: Section
  readonly variables: ReadonlyArray<EnvVariable<unknown>>
}

const declared: Array<Declared> = []

/**
 * Declares a module's variables under a section of the reference page and returns them as given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const table = <const T extends Record<string, EnvVariable<unknown>>>(section: Section, variables: T): T => {
  declared.push({ section, variables: Object.values(variables) })
  return variables
}

/**
 * Every table declared by the modules loaded so far.
 *
 * @since 0.1.0
 * @category getters
 */
export const tables = (): ReadonlyArray<Declared> => declared

/**
 * The names of every variable declared by the modules loaded so far.
 *
 * @since 0.1.0
 * @category getters
 */
export const knownNames = (): ReadonlySet<string> => new Set(declared.flatMap((t) => t.variables.map((v) => v.name)))

/**
 * A variable from its parts (for a type the other constructors do not cover).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <V extends EnvVariable<unknown>>(variable: V): V => variable

const code = (value: string) => `\`${value}\``

const units: ReadonlyArray<readonly [number, string]> = [
  [86_400_000, "day"],
  [3_600_000, "hour"],
  [60_000, "minute"],
  [1_000, "second"],
  [1, "milli"]
]

/**
 * A duration as a person writes it in a variable (`30 seconds`, `500 millis`).
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatDuration = (input: Duration.Input): string => {
  const millis = Duration.toMillis(Duration.fromInputUnsafe(input))
  if (millis === 0) return "0 millis"
  const [size, unit] = units.find(([size]) => millis % size === 0) ?? [1, "milli"]
  const n = millis / size
  return `${n} ${unit}${n === 1 ? "" : "s"}`
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const boolean = (name: string, fallback: boolean, description: string): WithDefault<boolean> => ({
  name,
  value: fallback,
  type: "boolean",
  default: code(String(fallback)),
  description,
  config: Config.Boolean(name).pipe(Config.withDefault(fallback))
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const integer = (name: string, fallback: number, description: string): WithDefault<number> => ({
  name,
  value: fallback,
  type: "integer",
  default: code(String(fallback)),
  description,
  config: Config.Int(name).pipe(Config.withDefault(fallback))
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const duration = (
  name: string,
  fallback: Duration.Input,
  description: string
): WithDefault<Duration.Duration> => ({
  name,
  value: Duration.fromInputUnsafe(fallback),
  type: "duration",
  default: code(formatDuration(fallback)),
  description,
  config: Config.Duration(name).pipe(Config.withDefault(Duration.fromInputUnsafe(fallback)))
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const string = (name: string, fallback: string, description: string): WithDefault<string> => ({
  name,
  value: fallback,
  type: "string",
  default: code(fallback),
  description,
  config: Config.String(name).pipe(Config.withDefault(fallback))
})

/**
 * One of `values`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const literal = <const L extends ReadonlyArray<string>>(
  name: string,
  values: L,
  fallback: L[number],
  description: string
): WithDefault<L[number]> => ({
  name,
  value: fallback,
  type: values.map(code).join(" \\| "),
  default: code(fallback),
  description,
  config: Config.Literals(values, name).pipe(Config.withDefault(fallback)) as Config.Config<L[number]>
})

/**
 * A secret (never logged), required.
 *
 * @since 0.1.0
 * @category constructors
 */
export const secret = (name: string, description: string): EnvVariable<Redacted.Redacted<string>> => ({
  name,
  type: "secret",
  default: "required",
  description,
  config: Config.Redacted(name)
})

/**
 * A variable without a default: `None` when unset; `absent` says what that means.
 *
 * @since 0.1.0
 * @category constructors
 */
export const optional = <A>(
  variable: Omit<EnvVariable<A>, "default">,
  absent: string
): EnvVariable<Option.Option<A>> => ({
  ...variable,
  default: `unset: ${absent}`,
  config: Config.option(variable.config)
})

/**
 * An optional integer (see {@link optional}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const optionalInteger = (name: string, absent: string, description: string) =>
  optional({ name, type: "integer", description, config: Config.Int(name) }, absent)

/**
 * An optional string (see {@link optional}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const optionalString = (name: string, absent: string, description: string) =>
  optional({ name, type: "string", description, config: Config.String(name) }, absent)

/**
 * An optional duration (see {@link optional}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const optionalDuration = (name: string, absent: string, description: string) =>
  optional({ name, type: "duration", description, config: Config.Duration(name) }, absent)

const packageOrder = ["core", "adapter-pg", "adapter-kafka", "adapter-kafka-platformatic", "cli"]

// A pipe would end the table cell; one already escaped stays as it is.
const cell = (text: string) => text.replace(/(?<!\\)\|/g, "\\|")

/**
 * The reference page: one table per section, packages in dependency order.
 *
 * @since 0.1.0
 * @category formatting
 */
export const markdown = (declaredTables: ReadonlyArray<Declared>): string => {
  const rank = (p: string) => (packageOrder.includes(p) ? packageOrder.indexOf(p) : packageOrder.length)
  const sections = [...declaredTables].sort((a, b) => rank(a.section.package) - rank(b.section.package))
  const lines = [
    "# Configuration",
    "",
    "<!-- Generated by `pnpm config:docs` from the variable tables in packages/*/src (EnvVariable.table);",
    "     edit the tables, not this page: CI fails when it is stale. -->",
    "",
    "Every setting the layers do not get as an explicit option is read through Effect's `Config`,",
    "from environment variables by default (a `ConfigProvider` of your own works the same way).",
    "Options passed in code win over the environment. Durations are written as `500 millis`,",
    "`30 seconds`, `5 minutes`, `7 days`; booleans as `true`/`false`. An `OUTBOX_*` variable no",
    "module declares is reported at start (one warning naming it and the closest known name).",
    ""
  ]
  for (const { section, variables } of sections) {
    lines.push(`## ${section.title} (\`@effect-outbox/${section.package}\`)`, "")
    lines.push("| variable | type | default | meaning |", "|---|---|---|---|")
    for (const v of variables) {
      lines.push(`| \`${v.name}\` | ${v.type} | ${cell(v.default)} | ${cell(v.description)} |`)
    }
    lines.push("")
  }
  return lines.join("\n")
}
