/**
 * What the `Publisher` / `BrokerProbe` / `BrokerAdmin` cases share: the services under test, the
 * feature switches, and assertions over publish outcomes.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { PublishError } from "@effect-outbox/core/Errors"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import type { Publisher, PublishOutcome } from "@effect-outbox/core/Publisher"
import * as Result from "effect/Result"
import type * as SuiteCase from "../suiteCase.ts"
import type { Topics } from "../topics.ts"

export type Services = Publisher | BrokerProbe | BrokerAdmin

/** The suite's feature switches (documented on `BrokerSuite.Features`). */
export type Feature = "missingTopicIsPermanent" | "retention"

export type Case = SuiteCase.Case<Topics, Services, Feature>

export const receiptOf = (outcome: PublishOutcome | undefined): PublishReceipt => {
  assert.isDefined(outcome)
  if (Result.isFailure(outcome)) throw new Error(`expected a receipt, got ${outcome.failure.message}`)
  return outcome.success
}

export const errorOf = (outcome: PublishOutcome | undefined): PublishError => {
  assert.isDefined(outcome)
  if (Result.isSuccess(outcome)) throw new Error(`expected an error, got offset ${outcome.success.offset}`)
  return outcome.failure
}

export const assertIncreasing = (offsets: ReadonlyArray<string>) => {
  for (let i = 1; i < offsets.length; i++) {
    assert.isTrue(BigInt(offsets[i - 1]!) < BigInt(offsets[i]!), `offsets ${offsets.join(",")} are not increasing`)
  }
}
