// Package team is octet's delegation manager: a root agent's run can start
// child agents, each with a stable id and ancestry path, its own
// append-only session and agent loop, and a fresh context.
//
// # Inheritance
//
// A child inherits, at spawn time, its parent's effective system prompt,
// model, reasoning selection, turn and tool-call limits, output reserve,
// transport and a clone of its retry policy (the same budget: prices, the
// session token ceiling, a missing one staying missing, and the session
// cost ceiling), and a clone of the parent's effect broker sharing the
// policy and grant store ([tools.Broker.Clone]): a child has exactly its
// parent's authority. Its tools are the parent's standard tools (read,
// search, edit, write, bash) unless the spawn narrows them.
//
// # Limits
//
// A semaphore and ancestry checks enforce [Limits] independently of the
// model: by default 10 concurrent agents including the root, depth 2 and
// 32 agents in total (the root included) during each owning run. The
// first-party subagents service the product uses ([ProductService]) is
// stricter: children sit exactly one level below the root, at most 8 are
// active per parent and 32 records are retained per owner. Inputs above
// 128 KiB and anything over a bound are rejected before provenance is
// written.
//
// # Queues
//
// Each child has one owner goroutine (its worker) from spawn to end and a
// command channel of [MaxCommands]. A follow-up, message, interrupt or
// the shutdown is recorded, then put in the child's state under the team
// lock in FIFO order, and only then wakes the worker, which rereads that
// state; a full channel (control backpressure) therefore neither blocks
// the caller nor loses or reorders work. Per child at most
// [MaxBacklogMessages] follow-ups and [MaxPendingMessages] direct
// messages are pending (each bounded in bytes too), counted until the
// child's session durably holds them; overflow is rejected before
// provenance. An agent messages its descendants and its peers (children
// of its parent) only: steering for a pending or running child, queued
// for an idle child of a generic team and moved into its next prompt,
// where a failed append restores them at the front. A follow-up whose
// prompt cannot be appended is retried [MaxDeliveryAttempts] times
// ([RetryBackoff], doubling), each retry durable and visible first, and
// then kept at the front. A generic team's child whose run fails or is
// interrupted stays idle with its unacknowledged follow-ups, which run,
// oldest first, ahead of its next follow-up: never released or
// discarded, and not started on their own (an interrupt means stop).
//
// # Provenance
//
// Every team has an owner-only (0700) random directory, created and
// removed relative to its parent directory's descriptor without following
// links, holding the children's sessions and provenance.jsonl. Each
// spawn, status transition, interrupt and the shutdown are appended and
// synced (fdatasync) before the state change they record becomes
// visible. When an append or sync fails the team records a diagnostic
// ([Team.Err]), rejects new work and cancels every worker.
//
// A wait's page of messages is consumed only when the result carrying it
// is durable in the owner's session, whose details list the messages'
// team, id and end ([ConsumedKey]). A new team redelivers to the root the
// direct messages that earlier teams of the same root session recorded
// and no committed result consumed (a crash between a lease and the
// append), each recorded again first.
//
// # Ending
//
// Cancellation goes down the ancestry: interrupting a child cancels its
// descendants, and every end of the owning run (completed, failed, max
// turns, cancelled) shuts the team down ([Owner.RunEnd], installed as the
// root's agent.Config.RunEnd): every worker is cancelled, the descendants
// get up to 2 s to settle, and one delegated-usage record per child is
// appended to the root session in the checkpoint's batch. A child still
// running then is mirrored with its known subtotal, marked uncertain.
// Child usage counts toward the root's cost ceiling, never toward the
// parent's own-context token ceiling, and never enters a prompt.
package team
