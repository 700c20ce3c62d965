/**
 * What the `ParkedStore` cases share: each case builds the store it needs with the bound it
 * needs (`layer(maxRecords)`), fresh for that case.
 *
 * @internal
 */
import type { ParkedStore } from "@effect-outbox/core/ParkedStore"
import type * as Layer from "effect/Layer"
import type * as SuiteCase from "../suiteCase.ts"

export interface Context {
  /** A fresh store whose bound is `maxRecords` positions. */
  readonly layer: (maxRecords: number) => Layer.Layer<ParkedStore, unknown>
}

export type Case = SuiteCase.Case<Context, never>
