// R6.4: mailbox commands take the canonical mailbox user id; an e-mail address or an auth
// provider's subject is refused by the compiler and by the decoder.
import { assert, describe, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { AuthSubject, EmailAddress, MailboxUserId } from "../src/Ids.ts"
import * as Mailbox from "../src/Mailbox.ts"

const topic = Mailbox.mailboxTopic("mailbox")
const userId = MailboxUserId.make("7d9f2b8e-4c1a-4f7e-9b2d-1a2b3c4d5e6f")
const email = EmailAddress.make("ada@example.com")
const subject = AuthSubject.make("auth0|42")

describe("mailbox identities", () => {
  it("a command is keyed by the canonical id; other ids do not type-check", () => {
    const ok = Mailbox.deliver(topic, userId, "m1", "hello")
    // @ts-expect-error an e-mail address is not a mailbox user id
    const byEmail = () => Mailbox.deliver(topic, email, "m1", "hello")
    // @ts-expect-error an auth provider's subject is not a mailbox user id
    const bySubject = () => Mailbox.archive(topic, subject, "m1")
    // @ts-expect-error a plain string is not a mailbox user id either
    const byString = () => Mailbox.archive(topic, "7d9f2b8e-4c1a-4f7e-9b2d-1a2b3c4d5e6f", "m1")
    assert.isDefined(ok)
    assert.isFunction(byEmail)
    assert.isFunction(bySubject)
    assert.isFunction(byString)
    assert.strictEqual(topic.key({ _tag: "Archive", userId, messageId: "m1" }), userId)
  })

  it("a record whose user id is not canonical does not decode (and would be dead-lettered)", () => {
    const decode = Schema.decodeUnknownExit(Mailbox.MailboxCommand)
    assert.strictEqual(decode({ _tag: "Deliver", userId, messageId: "m1", subject: "s" })._tag, "Success")
    assert.strictEqual(
      decode({ _tag: "Deliver", userId: "ada@example.com", messageId: "m1", subject: "s" })._tag,
      "Failure"
    )
    assert.strictEqual(decode({ _tag: "Archive", userId: "auth0|42", messageId: "m1" })._tag, "Failure")
  })
})
