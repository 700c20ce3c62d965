/**
 * A `KafkaSecurity.Security` as @platformatic/kafka options: `tls` (Node's TLS options) and `sasl`.
 */
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import type { BaseOptions } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const mechanisms = {
  plain: "PLAIN",
  "scram-sha-256": "SCRAM-SHA-256",
  "scram-sha-512": "SCRAM-SHA-512",
  oauthbearer: "OAUTHBEARER"
} as const

export const platformaticSecurity = (security: KafkaSecurity.Security): Pick<BaseOptions, "tls" | "sasl"> => {
  const out: { tls?: Exclude<BaseOptions["tls"], undefined>; sasl?: Exclude<BaseOptions["sasl"], undefined> } = {}
  const tls = security.tls
  if (tls !== undefined) {
    out.tls = {
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
        ? { mechanism: mechanisms.oauthbearer, token: () => Effect.runPromise(sasl.token) }
        : { mechanism: mechanisms[sasl.mechanism], username: sasl.username, password: Redacted.value(sasl.password) }
  }
  return out
}
