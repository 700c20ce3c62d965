/**
 * The former name of `PlatformaticOutbox`, kept so existing imports keep working.
 *
 * @since 0.1.0
 * @deprecated Use `PlatformaticOutbox`.
 */
export * from "./PlatformaticOutbox.ts"
