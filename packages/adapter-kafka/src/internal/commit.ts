/**
 * How a kafkajs subscription commits, beyond the Kafka layer's `CommitFilter`: a commit at the
 * offset right after a batch's last record moves past the transaction markers that end it, and
 * a commit that covers an outstanding batch finishes it.
 */
import * as CommitFilter from "@effect-outbox/kafka/CommitFilter"
import type Kafkajs from "kafkajs"
import type { State } from "./handoff.ts"

export const commitHooks = (
  consumer: Kafkajs.Consumer,
  state: State
): Pick<CommitFilter.Subscription, "send" | "adjust" | "accepted"> => ({
  // Up to the last record of the latest batch means up to its last offset: what lies
  // between (markers, aborted records) is never delivered.
  adjust: (requested) => {
    const tail = state.tails.get(CommitFilter.slotOf(requested.topic, requested.partition))
    return tail !== undefined && BigInt(requested.offset) === tail.records && tail.offsets > tail.records
      ? { ...requested, offset: tail.offsets.toString() }
      : requested
  },
  send: (commits) =>
    consumer.commitOffsets(commits.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }))),
  // A commit covering a whole outstanding batch finishes it, even if the stream stopped
  // without pulling again (e.g. `Stream.take`).
  accepted: (commits) => {
    for (const o of commits) {
      for (const handoff of state.outstanding) {
        const { batch } = handoff
        if (batch.topic === o.topic && batch.partition === o.partition && handoff.lastOffset < BigInt(o.offset)) {
          handoff.settle("finished")
        }
      }
    }
  }
})
