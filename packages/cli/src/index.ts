/**
 * `@effect-outbox/cli`: the operator CLI and its operations, one namespace per module.
 *
 * @since 0.1.0
 */
export * as Operations from "./Operations.ts"
