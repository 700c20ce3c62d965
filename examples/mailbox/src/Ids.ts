/**
 * The mailbox's identities. A mailbox command is keyed by the canonical mailbox user id
 * — never a display e-mail, never an auth provider's subject. All three are strings at run time;
 * the brands make handing one where another is expected a compile error.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The canonical mailbox user id: a UUID minted when the user is created; the record key and the
 * owner of the user's partition.
 *
 * @since 0.1.0
 * @category ids
 */
export const MailboxUserId = Schema.String.check(Schema.isUUID()).pipe(Schema.brand("MailboxUserId"))

/**
 * @since 0.1.0
 * @category ids
 */
export type MailboxUserId = typeof MailboxUserId.Type

/**
 * A display e-mail address: changes over time, so it never identifies a mailbox.
 *
 * @since 0.1.0
 * @category ids
 */
export const EmailAddress = Schema.String.check(Schema.isPattern(/^[^@\s]+@[^@\s]+$/)).pipe(
  Schema.brand("EmailAddress")
)

/**
 * @since 0.1.0
 * @category ids
 */
export type EmailAddress = typeof EmailAddress.Type

/**
 * The identity provider's subject (`sub`): another system's id for the person.
 *
 * @since 0.1.0
 * @category ids
 */
export const AuthSubject = Schema.NonEmptyString.pipe(Schema.brand("AuthSubject"))

/**
 * @since 0.1.0
 * @category ids
 */
export type AuthSubject = typeof AuthSubject.Type
