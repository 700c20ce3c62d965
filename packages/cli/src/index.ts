/**
 * @since 0.1.0
 */
export * as Operations from "./Operations.ts"
