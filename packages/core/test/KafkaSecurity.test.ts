import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as KafkaSecurity from "../src/KafkaSecurity.ts"

const dir = mkdtempSync(join(tmpdir(), "kafka-security-"))
const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
const caFile = join(dir, "ca.pem")
const certFile = join(dir, "client.pem")
const keyFile = join(dir, "client.key")
const tokenFile = join(dir, "token")
const notPem = join(dir, "not.pem")
writeFileSync(caFile, pem)
writeFileSync(certFile, pem)
writeFileSync(keyFile, "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
writeFileSync(notPem, "hello")

const read = (env: Record<string, string>, options?: { token?: KafkaSecurity.TokenProvider }) =>
  KafkaSecurity.config(options).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))

const failure = (env: Record<string, string>) =>
  read(env).pipe(
    Effect.flip,
    Effect.map((e) =>
      e._tag === "KafkaSecurityError"
        ? { variable: e.variable, message: e.message }
        : { variable: "", message: String(e) }
    )
  )

describe("KafkaSecurity.config", () => {
  it.effect("is plaintext when nothing is set", () =>
    Effect.gen(function* () {
      const security = yield* read({})
      expect(security).toEqual(KafkaSecurity.plaintext)
      expect(KafkaSecurity.describe(security)).toBe("plaintext")
    })
  )

  it.effect("SCRAM over TLS with the system trust store: the managed-Kafka shape (Confluent Cloud, MSK SCRAM)", () =>
    Effect.gen(function* () {
      const security = yield* read({
        KAFKA_SASL_MECHANISM: "scram-sha-512",
        KAFKA_SASL_USERNAME: "app",
        KAFKA_SASL_PASSWORD: "s3cret"
      })
      expect(security.tls).toEqual({
        ca: [],
        cert: undefined,
        key: undefined,
        keyPassword: undefined,
        rejectUnauthorized: true
      })
      expect(security.sasl?.mechanism).toBe("scram-sha-512")
      if (security.sasl?.mechanism !== "scram-sha-512") return
      expect(security.sasl.username).toBe("app")
      expect(Redacted.value(security.sasl.password)).toBe("s3cret")
      expect(KafkaSecurity.describe(security)).toBe("TLS, SASL SCRAM-SHA-512 as app")
      expect(KafkaSecurity.describe(security)).not.toContain("s3cret")
    })
  )

  it.effect("KAFKA_SSL=false with SASL is SASL_PLAINTEXT", () =>
    Effect.gen(function* () {
      const security = yield* read({
        KAFKA_SSL: "false",
        KAFKA_SASL_MECHANISM: "plain",
        KAFKA_SASL_USERNAME: "app",
        KAFKA_SASL_PASSWORD: "pw"
      })
      expect(security.tls).toBeUndefined()
      expect(KafkaSecurity.describe(security)).toBe("plaintext, SASL PLAIN as app")
    })
  )

  it.effect("mutual TLS reads the PEM files when the layer is built", () =>
    Effect.gen(function* () {
      const security = yield* read({
        KAFKA_SSL_CA_FILE: caFile,
        KAFKA_SSL_CERT_FILE: certFile,
        KAFKA_SSL_KEY_FILE: keyFile
      })
      expect(security.tls?.ca).toEqual([pem])
      expect(security.tls?.cert).toBe(pem)
      expect(security.tls?.key).toContain("PRIVATE KEY")
      expect(KafkaSecurity.describe(security)).toBe("mutual TLS")
    })
  )

  it.effect("OAUTHBEARER takes the token provider given in code, or re-reads the token file at every call", () =>
    Effect.gen(function* () {
      const fromCode = yield* read({ KAFKA_SASL_MECHANISM: "oauthbearer" }, { token: Effect.succeed("jwt-1") })
      if (fromCode.sasl?.mechanism !== "oauthbearer") throw new Error("expected oauthbearer")
      expect(yield* fromCode.sasl.token).toBe("jwt-1")

      writeFileSync(tokenFile, "jwt-a\n")
      const fromFile = yield* read({
        KAFKA_SASL_MECHANISM: "oauthbearer",
        KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile
      })
      if (fromFile.sasl?.mechanism !== "oauthbearer") throw new Error("expected oauthbearer")
      expect(yield* fromFile.sasl.token).toBe("jwt-a")
      writeFileSync(tokenFile, "jwt-b")
      expect(yield* fromFile.sasl.token).toBe("jwt-b")
    })
  )

  it.effect("settings that cannot work fail before any connection, naming the variable", () =>
    Effect.gen(function* () {
      expect((yield* failure({ KAFKA_SSL_CA_FILE: join(dir, "missing.pem") })).variable).toBe("KAFKA_SSL_CA_FILE")
      expect((yield* failure({ KAFKA_SSL_CA_FILE: notPem })).message).toContain("no PEM block")
      expect((yield* failure({ KAFKA_SSL_CERT_FILE: certFile })).variable).toBe("KAFKA_SSL_KEY_FILE")
      expect((yield* failure({ KAFKA_SSL: "false", KAFKA_SSL_CA_FILE: caFile })).variable).toBe("KAFKA_SSL")
      expect((yield* failure({ KAFKA_SASL_MECHANISM: "plain", KAFKA_SASL_PASSWORD: "x" })).variable).toBe(
        "KAFKA_SASL_USERNAME"
      )
      expect((yield* failure({ KAFKA_SASL_MECHANISM: "scram-sha-256", KAFKA_SASL_USERNAME: "u" })).variable).toBe(
        "KAFKA_SASL_PASSWORD"
      )
      expect((yield* failure({ KAFKA_SASL_USERNAME: "u", KAFKA_SASL_PASSWORD: "p" })).variable).toBe(
        "KAFKA_SASL_MECHANISM"
      )
      expect((yield* failure({ KAFKA_SASL_MECHANISM: "oauthbearer" })).variable).toBe(
        "KAFKA_SASL_OAUTHBEARER_TOKEN_FILE"
      )
      // A mechanism the clients do not speak is a Config error naming the variable and the choices.
      expect((yield* failure({ KAFKA_SASL_MECHANISM: "gssapi" })).message).toContain("KAFKA_SASL_MECHANISM")
    })
  )
})
