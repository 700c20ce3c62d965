/**
 * The header-name serializer of the publisher's producers: `stringSerializer` with the bytes of
 * each name kept. Every record carries the same few names (`event-id`, `traceparent`, the
 * application's own), so encoding each name once saves a buffer per header per record. The
 * client copies the bytes into its request and never writes to them.
 */
import { stringSerializer } from "@platformatic/kafka"

/** Names kept at most: past this, names are encoded per record (an application with unbounded names). */
const MAX_NAMES = 256

export const headerNameSerializer = (): ((name?: string) => Buffer | undefined) => {
  const names = new Map<string, Buffer>()
  return (name) => {
    if (typeof name !== "string") return stringSerializer(name)
    const known = names.get(name)
    if (known !== undefined) return known
    const bytes = stringSerializer(name)
    if (bytes !== undefined && names.size < MAX_NAMES) names.set(name, bytes)
    return bytes
  }
}
