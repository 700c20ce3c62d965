/**
 * The real-service harness: where integration tests, fault tests and benchmarks find PostgreSQL
 * and Kafka. It picks, in order: explicit environment (`DATABASE_URL`, `KAFKA_BROKERS`) → Docker
 * through testcontainers (when `EFFECT_OUTBOX_USE_DOCKER=1` and a Docker engine answers) → the
 * project's own `scripts/services up` (a real Kafka broker from Maven Central and the local
 * PostgreSQL). See docs/services.md.
 *
 * @since 0.1.0
 */

import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * Where the services are, and how they were found.
 *
 * @since 0.1.0
 * @category models
 */
export interface Endpoints {
  readonly databaseUrl: string
  readonly kafkaBrokers: ReadonlyArray<string>
  readonly source: "env" | "docker" | "local-script"
}

/**
 * @since 0.1.0
 * @category errors
 */
export class ServicesUnavailableError extends Schema.TaggedError<ServicesUnavailableError>()(
  "ServicesUnavailableError",
  { reason: Schema.String }
) {
  override get message() {
    return `real services unavailable: ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category services
 */
export class RealServices extends Context.Service<RealServices, Endpoints>()("@effect-outbox/testing/RealServices") {}

const fromEnv = Effect.gen(function* () {
  const databaseUrl = yield* Config.option(Config.String("DATABASE_URL"))
  const brokers = yield* Config.option(Config.String("KAFKA_BROKERS"))
  if (Option.isSome(databaseUrl) && Option.isSome(brokers)) {
    return Option.some<Endpoints>({
      databaseUrl: databaseUrl.value,
      kafkaBrokers: brokers.value
        .split(",")
        .map((b) => b.trim())
        .filter((b) => b.length > 0),
      source: "env"
    })
  }
  return Option.none<Endpoints>()
})

const dockerWanted = Config.Boolean("EFFECT_OUTBOX_USE_DOCKER").pipe(Config.withDefault(false))

const dockerAvailable = (): boolean => process.env.DOCKER_HOST !== undefined || existsSync("/var/run/docker.sock")

/**
 * Starts PostgreSQL and a KRaft Kafka broker in containers for the lifetime of the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTestcontainers: Layer.Layer<RealServices, ServicesUnavailableError> = Layer.effect(RealServices)(
  Effect.gen(function* () {
    // Optional peer dependencies: only this layer needs them, and they are heavy to install.
    const missing = (e: unknown) =>
      new ServicesUnavailableError({
        reason: `testcontainers is not installed (npm install -D testcontainers @testcontainers/postgresql @testcontainers/kafka): ${String(e)}`
      })
    const { PostgreSqlContainer } = yield* Effect.tryPromise({
      try: () => import("@testcontainers/postgresql"),
      catch: missing
    })
    const { KafkaContainer } = yield* Effect.tryPromise({ try: () => import("@testcontainers/kafka"), catch: missing })
    const pg = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => new PostgreSqlContainer("postgres:16-alpine").start(),
        catch: (e) => new ServicesUnavailableError({ reason: `postgres container: ${String(e)}` })
      }),
      (c) => Effect.promise(() => c.stop())
    )
    const kafka = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => new KafkaContainer("confluentinc/cp-kafka:7.9.0").withKraft().start(),
        catch: (e) => new ServicesUnavailableError({ reason: `kafka container: ${String(e)}` })
      }),
      (c) => Effect.promise(() => c.stop())
    )
    return {
      databaseUrl: pg.getConnectionUri(),
      kafkaBrokers: [`${kafka.getHost()}:${kafka.getMappedPort(9093)}`],
      source: "docker" as const
    }
  })
)

const repoRoot = (): string | undefined => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "scripts", "services"))) return dir
    dir = dirname(dir)
  }
  return undefined
}

/**
 * Runs `scripts/services up` and reads the endpoints it reports.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocalScript: Layer.Layer<RealServices, ServicesUnavailableError> = Layer.effect(RealServices)(
  Effect.gen(function* () {
    const root = repoRoot()
    if (root === undefined) {
      return yield* new ServicesUnavailableError({
        reason:
          "scripts/services not found (run from the effect-outbox repository or set DATABASE_URL and KAFKA_BROKERS)"
      })
    }
    const run = (arg: string) =>
      Effect.callback<string, ServicesUnavailableError>((resume) => {
        execFile("bash", [join(root, "scripts", "services"), arg], { timeout: 600_000 }, (error, stdout, stderr) => {
          resume(
            error
              ? Effect.fail(
                  new ServicesUnavailableError({ reason: `scripts/services ${arg}: ${stderr || error.message}` })
                )
              : Effect.succeed(stdout)
          )
        })
      })
    yield* run("up")
    const env = Object.fromEntries(
      (yield* run("env"))
        .split("\n")
        .filter((l) => l.includes("="))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)])
    )
    return {
      databaseUrl: env.DATABASE_URL!,
      kafkaBrokers: env.KAFKA_BROKERS!.split(","),
      source: "local-script" as const
    }
  })
)

/**
 * The harness's choice: environment → Docker (opt-in) → local script.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RealServices, ServicesUnavailableError> = Layer.unwrap(
  Effect.gen(function* () {
    const env = yield* fromEnv.pipe(Effect.orElseSucceed(() => Option.none<Endpoints>()))
    if (Option.isSome(env)) return Layer.succeed(RealServices)(env.value)
    const wantDocker = yield* dockerWanted.pipe(Effect.orElseSucceed(() => false))
    if (wantDocker && dockerAvailable()) return layerTestcontainers
    return layerLocalScript
  })
)
