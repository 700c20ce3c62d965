/**
 * A `KafkaSecurity.Security` as kafkajs options: `ssl` (Node's TLS options) and `sasl`.
 */
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type Kafkajs from "kafkajs"

export const kafkajsSecurity = (security: KafkaSecurity.Security): Pick<Kafkajs.KafkaConfig, "ssl" | "sasl"> => {
  const out: { ssl?: Exclude<Kafkajs.KafkaConfig["ssl"], undefined>; sasl?: Kafkajs.SASLOptions } = {}
  const tls = security.tls
  if (tls !== undefined) {
    out.ssl = {
      rejectUnauthorized: tls.rejectUnauthorized,
      ...(tls.ca.length > 0 ? { ca: [...tls.ca] } : {}),
      ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
      ...(tls.key !== undefined ? { key: tls.key } : {}),
      ...(tls.keyPassword !== undefined ? { passphrase: Redacted.value(tls.keyPassword) } : {})
    }
  }
  const sasl = security.sasl
  if (sasl !== undefined) {
    out.sasl =
      sasl.mechanism === "oauthbearer"
        ? {
            mechanism: "oauthbearer",
            oauthBearerProvider: async () => ({ value: await Effect.runPromise(sasl.token) })
          }
        : sasl.mechanism === "plain"
          ? { mechanism: "plain", username: sasl.username, password: Redacted.value(sasl.password) }
          : sasl.mechanism === "scram-sha-256"
            ? { mechanism: "scram-sha-256", username: sasl.username, password: Redacted.value(sasl.password) }
            : { mechanism: "scram-sha-512", username: sasl.username, password: Redacted.value(sasl.password) }
  }
  return out
}
