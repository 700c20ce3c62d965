/**
 * What start-up refuses before anything runs: topics a consumer needs that do not exist, brokers
 * that do not answer, and brokers that refuse the connection's security. Re-exported by `Errors`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Topics the runtime's consumers read, or the dead-letter topics they write, do not exist on the
 * broker. Start-up stops here rather than leave a consumer waiting on a topic nobody writes, or
 * restarting each time it cannot dead-letter a record.
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingTopicsError extends Schema.TaggedError<MissingTopicsError>()("MissingTopicsError", {
  topics: Schema.Array(Schema.String),
  brokers: Schema.String
}) {
  override get message() {
    const names = this.topics.join(" ")
    return (
      `topics missing on the Kafka brokers ${this.brokers}: ${this.topics.join(", ")}. ` +
      `Create them with \`effect-outbox topics ensure ${names} --execute\`, ` +
      `or set OUTBOX_AUTO_CREATE_TOPICS=true to have the runtime create them at start-up`
    )
  }
}

/**
 * The brokers did not answer within the start-up bound (`OUTBOX_BROKER_STARTUP_TIMEOUT`).
 *
 * @since 0.1.0
 * @category errors
 */
export class BrokerUnreachableError extends Schema.TaggedError<BrokerUnreachableError>()("BrokerUnreachableError", {
  brokers: Schema.String,
  waitedMillis: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return (
      `cannot reach the Kafka brokers ${this.brokers} (waited ${this.waitedMillis} ms): ${this.reason}. ` +
      `Check KAFKA_BROKERS; OUTBOX_BROKER_STARTUP_TIMEOUT sets how long start-up waits ("off" skips the check)`
    )
  }
}

/**
 * The brokers refused the connection at start-up: they do not accept the credentials
 * (`authentication`) or the TLS handshake failed on a certificate (`tls`). Asking again cannot
 * help, so start-up stops at the first such answer instead of waiting out its timeout.
 *
 * @since 0.1.0
 * @category errors
 */
export class BrokerSecurityError extends Schema.TaggedError<BrokerSecurityError>()("BrokerSecurityError", {
  brokers: Schema.String,
  security: Schema.Literals(["authentication", "tls"]),
  reason: Schema.String
}) {
  override get message() {
    const check =
      this.security === "authentication"
        ? "Check KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or the token provider)"
        : "Check KAFKA_SSL_CA_FILE (the CA that signed the brokers' certificates), KAFKA_SSL_CERT_FILE and " +
          "KAFKA_SSL_KEY_FILE, and that KAFKA_BROKERS names the TLS listener by a name its certificate holds"
    const what = this.security === "authentication" ? "refused the credentials" : "failed the TLS handshake"
    return `the Kafka brokers ${this.brokers} ${what}: ${this.reason}. ${check}`
  }
}
