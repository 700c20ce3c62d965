/**
 * A fake e-mail provider with the contract real ones offer: an idempotency key per request, so
 * a request repeated with the same key sends nothing twice. The notifications consumer
 * passes the event id; a redelivered or replayed event reaches the provider again and is absorbed
 * there, because an e-mail cannot join the database transaction.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/**
 * @since 0.1.0
 * @category models
 */
export interface Email {
  readonly idempotencyKey: string
  readonly to: string
  readonly subject: string
}

/**
 * The provider refused or timed out; retriable (the consumer retries with the same key).
 *
 * @since 0.1.0
 * @category errors
 */
export class EmailProviderUnavailable extends Schema.TaggedError<EmailProviderUnavailable>()(
  "EmailProviderUnavailable",
  {
    retriable: Schema.Boolean
  }
) {}

/**
 * @since 0.1.0
 * @category services
 */
export class EmailProvider extends Context.Service<
  EmailProvider,
  {
    /** `"sent"`, or `"duplicate"` when this key was sent before (nothing is sent again). */
    readonly send: (email: Email) => Effect.Effect<"sent" | "duplicate", EmailProviderUnavailable>
    /** Every request received, duplicates included (what a provider's request log shows). */
    readonly requests: Effect.Effect<ReadonlyArray<Email>>
    /** The e-mails actually sent. */
    readonly sent: Effect.Effect<ReadonlyArray<Email>>
  }
>()("@effect-outbox/example-order-service/EmailProvider") {}

/**
 * An in-memory provider. `failFirst` requests fail before anything is sent (a flaky provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFake = (options: { readonly failFirst?: number } = {}): Layer.Layer<EmailProvider> =>
  Layer.sync(EmailProvider)(() => {
    const requests: Array<Email> = []
    const sent = new Map<string, Email>()
    let failures = options.failFirst ?? 0
    return {
      send: (email) =>
        Effect.suspend(() => {
          requests.push(email)
          if (failures > 0) {
            failures--
            return Effect.fail(new EmailProviderUnavailable({ retriable: true }))
          }
          if (sent.has(email.idempotencyKey)) return Effect.succeed("duplicate" as const)
          sent.set(email.idempotencyKey, email)
          return Effect.succeed("sent" as const)
        }),
      requests: Effect.sync(() => [...requests]),
      sent: Effect.sync(() => [...sent.values()])
    }
  })
