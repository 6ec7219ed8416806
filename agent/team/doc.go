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
