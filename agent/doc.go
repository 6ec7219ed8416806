// Package agent is octet's run loop. An [Agent] owns one mutable session;
// [Agent.Prompt] starts a [Run] whose single owner goroutine reconstructs
// the canonical provider context from the session's active branch, streams
// one response, persists the complete assistant message, dispatches its
// tool calls through the effect broker, persists each result, and repeats
// until the model answers without calls.
//
// # Commit order
//
// Streaming deltas are provisional: they become events and never enter the
// session. The complete assistant message (text, reasoning with its opaque
// content, every function call) and the response's known usage are
// appended with one durable write before any call is admitted. Each call's
// result entry is durable before the next call starts (parallel waves
// persist their results in call order). Every run writes exactly one
// checkpoint and emits exactly one [RunFinished], whatever happens.
//
// # Tool dispatch
//
// Calls run in model order. Arguments are checked against the tool's JSON
// schema before anything classifies them (invalid ⇒ a static paired error
// that reaches neither the broker, hooks nor the tool). At most 32 calls
// per response are executed; the rest get paired errors. Contiguous calls
// that are statically Parallel, exactly classified Pure, WorkspaceRead or
// HostRead and admitted run in waves of at most four; anything else is a
// barrier. Nothing is ever executed from streamed tool-call deltas.
//
// # Controls and cancellation
//
// [Run.Steer] input is delivered at the next safe boundary (after the
// current tool results), [Run.FollowUp] input when the run would otherwise
// end, and [Run.FinishNow] makes the rest of the run tool-free (calls of
// the open response not yet admitted are paired with errors). The final
// drain/close decision and control submission are serialized, so a
// control is either delivered (persisted as an entry) or refused with
// [ErrRunEnded]; accepted input of a run that ends early (cancelled,
// failed, max turns) is persisted before the checkpoint. [Run.Cancel] is
// one level-triggered abort selected against provider opening, body
// consumption, retry waits, approvals, tools and compaction; cancellation
// wins a same-poll race.
//
// # Event delivery contract
//
// [Run.Events] is must-deliver and ordered: every event, provisional deltas
// included, arrives exactly once, Seq increases by one from 1, and the
// channel closes right after the single [RunFinished]. The channel has a
// bounded buffer; when it is full the owner goroutine waits, so a slow
// consumer paces the run but can never make it lose an event (terminal
// events included). Consumers must drain the channel until it closes, or
// cancel the run: a cancelled run never waits for the consumer, so it
// still settles, checkpoints and releases the agent with nobody reading,
// and keeps the events that did not fit for a later reader. [Run.Wait]
// returns once the checkpoint is durable, without waiting for the final
// RunFinished to be read. A consumer may also take events on the owner
// goroutine itself ([PromptOptions.Deliver], no goroutine handoff): it is
// offered each event of a live run first, must take one only in order and
// only without waiting, and what it refuses goes to the channel as above.
//
// # Crash replay
//
// [New] settles calls a previous process left without a result: a call is
// executed again only when its tool is ReplaySafe and its exact
// classification Pure or WorkspaceRead (and the broker admits it); every
// other unresolved call gets a durable "indeterminate" paired error.
package agent
