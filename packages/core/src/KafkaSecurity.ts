/**
 * Secured Kafka from configuration: TLS (the CA that signed the brokers' certificates, a client
 * certificate for mutual TLS) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), read
 * once from `KAFKA_SSL_*` / `KAFKA_SASL_*` and handed to whichever Kafka client runs. Both Kafka
 * adapters map a {@link Security} onto their client's options, so the variables mean the same on
 * either.
 *
 * Files are read when the layer is built: a path that does not exist fails start-up with a
 * {@link KafkaSecurityError} naming the variable, instead of a TLS error at the first connection.
 * An OAUTHBEARER token comes from a {@link TokenProvider} given in code (a cloud SDK's signer), or
 * from `KAFKA_SASL_OAUTHBEARER_TOKEN_FILE`, re-read at every authentication so a rotated token
 * (a Kubernetes projected token, a sidecar's file) is picked up without a restart.
 *
 * @since 0.1.0
 */
import { readFile } from "node:fs/promises"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as EnvVariable from "./EnvVariable.ts"

/**
 * TLS settings, PEM contents (not paths).
 *
 * @since 0.1.0
 * @category models
 */
export interface Tls {
  /** The CAs to trust; none means the system's trust store (a public CA, as managed Kafka uses). */
  readonly ca: ReadonlyArray<string>
  /** A client certificate and its key, for brokers that require mutual TLS. */
  readonly cert: string | undefined
  readonly key: string | undefined
  readonly keyPassword: Redacted.Redacted<string> | undefined
  /** `false` accepts any certificate: for a local test broker only, never in production. */
  readonly rejectUnauthorized: boolean
}

/**
 * An OAUTHBEARER token for each authentication (it may be a fresh one every time).
 *
 * @since 0.1.0
 * @category models
 */
export type TokenProvider = Effect.Effect<string, KafkaSecurityError>

/**
 * @since 0.1.0
 * @category models
 */
export type Sasl =
  | {
      readonly mechanism: "plain" | "scram-sha-256" | "scram-sha-512"
      readonly username: string
      readonly password: Redacted.Redacted<string>
    }
  | { readonly mechanism: "oauthbearer"; readonly token: TokenProvider }

/**
 * What a Kafka client needs to reach a secured cluster; both fields undefined is plaintext.
 *
 * @since 0.1.0
 * @category models
 */
export interface Security {
  readonly tls: Tls | undefined
  readonly sasl: Sasl | undefined
}

/**
 * Plaintext: no TLS, no SASL (a broker on loopback, the tests' default).
 *
 * @since 0.1.0
 * @category constructors
 */
export const plaintext: Security = { tls: undefined, sasl: undefined }

/**
 * A security setting that cannot work, found before any connection: the variable and what to do.
 *
 * @since 0.1.0
 * @category errors
 */
export class KafkaSecurityError extends Schema.TaggedError<KafkaSecurityError>()("KafkaSecurityError", {
  variable: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.variable}: ${this.reason}`
  }
}

const mechanisms = ["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"] as const

const section = { package: "adapter-kafka", title: "Kafka security: TLS and SASL (both Kafka adapters)" }

/**
 * @since 0.1.0
 * @category config
 */
export const variables = EnvVariable.table(section, {
  ssl: EnvVariable.optional(
    { name: "KAFKA_SSL", type: "boolean", description: "connect with TLS", config: Config.Boolean("KAFKA_SSL") },
    "on when a `KAFKA_SSL_*` file or `KAFKA_SASL_MECHANISM` is set (`false` then means SASL without TLS)"
  ),
  caFile: EnvVariable.optionalString(
    "KAFKA_SSL_CA_FILE",
    "the system's trust store",
    "a PEM file of the CA(s) that signed the brokers' certificates"
  ),
  certFile: EnvVariable.optionalString(
    "KAFKA_SSL_CERT_FILE",
    "no client certificate",
    "a PEM client certificate, for brokers that require mutual TLS (with `KAFKA_SSL_KEY_FILE`)"
  ),
  keyFile: EnvVariable.optionalString("KAFKA_SSL_KEY_FILE", "no client key", "the PEM key of `KAFKA_SSL_CERT_FILE`"),
  keyPassword: EnvVariable.optional(
    {
      name: "KAFKA_SSL_KEY_PASSWORD",
      type: "secret",
      description: "the passphrase of an encrypted `KAFKA_SSL_KEY_FILE`",
      config: Config.Redacted("KAFKA_SSL_KEY_PASSWORD")
    },
    "the key is not encrypted"
  ),
  rejectUnauthorized: EnvVariable.boolean(
    "KAFKA_SSL_REJECT_UNAUTHORIZED",
    true,
    "refuse brokers whose certificate the CAs do not vouch for (`false` only for a local test broker)"
  ),
  saslMechanism: EnvVariable.optional(
    {
      name: "KAFKA_SASL_MECHANISM",
      type: mechanisms.map((m) => `\`${m}\``).join(" \\| "),
      description: "authenticate with SASL",
      config: Config.Literals(mechanisms, "KAFKA_SASL_MECHANISM")
    },
    "no SASL"
  ),
  saslUsername: EnvVariable.optionalString(
    "KAFKA_SASL_USERNAME",
    "required by `plain` and `scram-*`",
    "the SASL user (an API key on Confluent Cloud)"
  ),
  saslPassword: EnvVariable.optional(
    {
      name: "KAFKA_SASL_PASSWORD",
      type: "secret",
      description: "the SASL password (an API secret on Confluent Cloud)",
      config: Config.Redacted("KAFKA_SASL_PASSWORD")
    },
    "required by `plain` and `scram-*`"
  ),
  oauthTokenFile: EnvVariable.optionalString(
    "KAFKA_SASL_OAUTHBEARER_TOKEN_FILE",
    "the token comes from a `TokenProvider` given in code",
    "a file holding the OAUTHBEARER token (a JWT), re-read at every authentication"
  )
})

const readText = (variable: string, path: string) =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (cause) =>
      new KafkaSecurityError({ variable, reason: `cannot read ${path}: ${(cause as Error).message ?? String(cause)}` })
  })

const readPem = (variable: string, path: string) =>
  readText(variable, path).pipe(
    Effect.flatMap((text) =>
      text.includes("-----BEGIN ")
        ? Effect.succeed(text)
        : Effect.fail(new KafkaSecurityError({ variable, reason: `${path} holds no PEM block (-----BEGIN ...)` }))
    )
  )

/**
 * A token provider reading a file at every authentication (surrounding whitespace removed).
 *
 * @since 0.1.0
 * @category constructors
 */
export const tokenFromFile = (path: string): TokenProvider =>
  readText("KAFKA_SASL_OAUTHBEARER_TOKEN_FILE", path).pipe(Effect.map((token) => token.trim()))

const optionalPem = (variable: string, path: Option.Option<string>) =>
  Option.match(path, {
    onNone: () => Effect.succeed(undefined),
    onSome: (p) => readPem(variable, p)
  })

interface Settings {
  readonly ssl: Option.Option<boolean>
  readonly caFile: Option.Option<string>
  readonly certFile: Option.Option<string>
  readonly keyFile: Option.Option<string>
  readonly keyPassword: Option.Option<Redacted.Redacted<string>>
  readonly rejectUnauthorized: boolean
  readonly saslMechanism: Option.Option<(typeof mechanisms)[number]>
  readonly saslUsername: Option.Option<string>
  readonly saslPassword: Option.Option<Redacted.Redacted<string>>
  readonly oauthTokenFile: Option.Option<string>
}

const settingsConfig: Config.Config<Settings> = Config.all({
  ssl: variables.ssl.config,
  caFile: variables.caFile.config,
  certFile: variables.certFile.config,
  keyFile: variables.keyFile.config,
  keyPassword: variables.keyPassword.config,
  rejectUnauthorized: variables.rejectUnauthorized.config,
  saslMechanism: variables.saslMechanism.config,
  saslUsername: variables.saslUsername.config,
  saslPassword: variables.saslPassword.config,
  oauthTokenFile: variables.oauthTokenFile.config
})

const fail = (variable: string, reason: string) => Effect.fail(new KafkaSecurityError({ variable, reason }))

const sasl = (s: Settings, token: TokenProvider | undefined): Effect.Effect<Sasl | undefined, KafkaSecurityError> => {
  if (Option.isNone(s.saslMechanism)) {
    const stray = Option.isSome(s.saslUsername) || Option.isSome(s.saslPassword) || Option.isSome(s.oauthTokenFile)
    return stray
      ? fail(
          "KAFKA_SASL_MECHANISM",
          "SASL credentials are set but no mechanism: set plain, scram-sha-256, scram-sha-512 or oauthbearer"
        )
      : Effect.succeed(undefined)
  }
  const mechanism = s.saslMechanism.value
  if (mechanism === "oauthbearer") {
    if (Option.isSome(s.oauthTokenFile))
      return Effect.succeed({ mechanism, token: tokenFromFile(s.oauthTokenFile.value) })
    if (token !== undefined) return Effect.succeed({ mechanism, token })
    return fail(
      "KAFKA_SASL_OAUTHBEARER_TOKEN_FILE",
      "oauthbearer needs a token: set this file, or give a TokenProvider in code (KafkaSecurity.config({ token }))"
    )
  }
  if (Option.isNone(s.saslUsername)) return fail("KAFKA_SASL_USERNAME", `${mechanism} needs a user name`)
  if (Option.isNone(s.saslPassword)) return fail("KAFKA_SASL_PASSWORD", `${mechanism} needs a password`)
  return Effect.succeed({ mechanism, username: s.saslUsername.value, password: s.saslPassword.value })
}

const tls = (s: Settings): Effect.Effect<Tls | undefined, KafkaSecurityError> =>
  Effect.gen(function* () {
    const files = [s.caFile, s.certFile, s.keyFile].some(Option.isSome)
    const on = Option.getOrElse(s.ssl, () => files || Option.isSome(s.saslMechanism))
    if (!on) {
      if (files)
        return yield* fail("KAFKA_SSL", "KAFKA_SSL is false but KAFKA_SSL_* files are set: remove them or turn TLS on")
      return undefined
    }
    if (Option.isSome(s.certFile) !== Option.isSome(s.keyFile)) {
      return yield* fail(
        Option.isSome(s.certFile) ? "KAFKA_SSL_KEY_FILE" : "KAFKA_SSL_CERT_FILE",
        "a client certificate needs both KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE"
      )
    }
    const ca = yield* optionalPem("KAFKA_SSL_CA_FILE", s.caFile)
    return {
      ca: ca === undefined ? [] : [ca],
      cert: yield* optionalPem("KAFKA_SSL_CERT_FILE", s.certFile),
      key: yield* optionalPem("KAFKA_SSL_KEY_FILE", s.keyFile),
      keyPassword: Option.getOrUndefined(s.keyPassword),
      rejectUnauthorized: s.rejectUnauthorized
    }
  })

/**
 * Reads the `KAFKA_SSL_*` / `KAFKA_SASL_*` variables and the files they name. `token` is the
 * OAUTHBEARER token provider when `KAFKA_SASL_MECHANISM=oauthbearer` and no token file is set.
 *
 * @since 0.1.0
 * @category config
 */
export const config = (options?: {
  readonly token?: TokenProvider | undefined
}): Effect.Effect<Security, KafkaSecurityError | Config.ConfigError> =>
  Effect.gen(function* () {
    const s = yield* settingsConfig
    return { tls: yield* tls(s), sasl: yield* sasl(s, options?.token) }
  }).pipe(Effect.withSpan("kafka.security.config"))

/**
 * How a connection is secured, for logs: never a secret.
 *
 * @since 0.1.0
 * @category formatting
 */
export const describe = (security: Security): string => {
  const parts: Array<string> = []
  if (security.tls === undefined) parts.push("plaintext")
  else parts.push(security.tls.cert === undefined ? "TLS" : "mutual TLS")
  if (security.sasl !== undefined) {
    const who = security.sasl.mechanism === "oauthbearer" ? "" : ` as ${security.sasl.username}`
    parts.push(`SASL ${security.sasl.mechanism.toUpperCase()}${who}`)
  }
  return parts.join(", ")
}
