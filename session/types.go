package session

import (
	"fmt"
	"time"
)

// FormatVersion is the version written into every new session header. A
// reader refuses a file whose header carries a larger version, because a
// version bump means an incompatible change; compatible additions (new
// record kinds, new fields) keep the version and are skipped by older
// readers.
const FormatVersion = 1

// Bounds on what the package parses and writes. A session that would cross
// one of them fails with a [LimitError] naming it.
const (
	// MaxFileBytes bounds the size of a session file (256 MiB).
	MaxFileBytes = 256 << 20
	// MaxRecords bounds the number of lines (header included) of a session.
	MaxRecords = 1_000_000
	// MaxRecordBytes bounds one encoded record including its newline
	// (64 MiB). It is larger than the 32 MiB local file limit so that a
	// write tool call carrying a whole file still fits after JSON escaping.
	MaxRecordBytes = 64 << 20
)

// Header is the first line of every session file.
type Header struct {
	// ID is the session id; it is also the file name without ".jsonl".
	ID string
	// Created is when the session was created (UTC).
	Created time.Time
	// Cwd is the working directory the session belongs to.
	Cwd string
	// Title is a human-readable title shown in session lists.
	Title string
	// Version is the format version the file was written with.
	Version int
	// ForkOf and ForkEntry name the session and entry a fork was made
	// from ("" for a session that is not a fork).
	ForkOf, ForkEntry string
}

// EntryType names what an [Entry] holds.
type EntryType string

// The entry types this version writes. Readers keep entries of other types
// in the tree and leave their interpretation to the caller.
const (
	// EntryUser is a user prompt; Text holds it.
	EntryUser EntryType = "user"
	// EntryAssistant is one complete assistant response; Items holds it.
	EntryAssistant EntryType = "assistant"
	// EntryToolResult is the result paired to one function call; Result
	// holds it.
	EntryToolResult EntryType = "tool_result"
	// EntryCompaction is a compaction summary; Compaction holds it.
	EntryCompaction EntryType = "compaction"
	// EntrySteering is a delivered steering input (user role); Text holds it.
	EntrySteering EntryType = "steering"
	// EntryFollowUp is a delivered follow-up input (user role); Text holds it.
	EntryFollowUp EntryType = "follow_up"
	// EntryContext is context the host gives the model as user-role
	// input (the environment: workspace, OS, shell, date, policy); Text
	// holds it. It is replayed to the model like a prompt but is not one
	// a person wrote.
	EntryContext EntryType = "context"
	// EntryRewind is a rewind of the workspace's files to an earlier
	// entry (octet/session/rewind); Result.Details holds its changes,
	// written before any file is touched. The agent does not replay it.
	EntryRewind EntryType = "rewind"
)

// Item types of an assistant [Item].
const (
	// ItemText is visible assistant text.
	ItemText = "text"
	// ItemReasoning is a reasoning item: summary text plus opaque content.
	ItemReasoning = "reasoning"
	// ItemFunctionCall is a tool call.
	ItemFunctionCall = "function_call"
	// ItemUserText is a user message a native compaction kept (Text).
	ItemUserText = "user_text"
	// ItemCompaction is a native compaction's opaque item
	// (EncryptedContent), replayed verbatim and never shown.
	ItemCompaction = "compaction"
)

// Item is one output item of an assistant response.
type Item struct {
	// Type is "text", "reasoning" or "function_call".
	Type string
	// ID is the provider's item id, if it gave one.
	ID string
	// Text is the text, or the reasoning summary text.
	Text string
	// Phase is an assistant text item's phase as the provider labelled it
	// ("commentary", "final_answer"); replayed so the model sees its own
	// labels again.
	Phase string
	// EncryptedContent is the opaque reasoning content; it is replayed
	// verbatim to the provider and never shown.
	EncryptedContent string
	// CallID, Name and Arguments describe a function call; Arguments is the
	// JSON string exactly as the model emitted it.
	CallID, Name, Arguments string
	// Async marks a function call the model made async (its tool was
	// advertised async): it is replayed as such, and after a crash it is
	// never executed again (an indeterminate error pairs it).
	Async bool
}

// ToolResult is the outcome of one tool call, paired to it by CallID.
type ToolResult struct {
	// CallID is the provider call id this result answers.
	CallID string
	// Tool is the tool name.
	Tool string
	// Text is the model-visible result text.
	Text string
	// IsError reports a tool failure the model should see.
	IsError bool
	// Details holds structured, tool-specific data for frontends; it is
	// never sent to the model.
	Details map[string]any
	// Attached is what the result gives the model besides its text
	// (view_image's image); nil: nothing.
	Attached *Attached
}

// ResultImages are the images a tool result gives the model (nil: none).
func (r *ToolResult) ResultImages() []Image {
	if r == nil || r.Attached == nil {
		return nil
	}
	return r.Attached.Images
}

// Attached is what a prompt or a tool result carries besides its text.
type Attached struct {
	// Images are its images, kept in octet's image store.
	Images []Image
}

// PromptImages are the images of a user entry's prompt (nil: none).
func (e *Entry) PromptImages() []Image {
	if e.Attached == nil {
		return nil
	}
	return e.Attached.Images
}

// Image is an image given to the model, kept in octet's image store
// ($OCTET_HOME/images) under the hex SHA-256 of its bytes: the ledger
// names it, the store holds it.
type Image struct {
	// MimeType is image/png, image/jpeg, image/gif or image/webp.
	MimeType string
	// SHA256 is the hex SHA-256 of the image's bytes: its name in the
	// store.
	SHA256 string
	// Bytes is its size.
	Bytes int64
}

// Compaction is the summary that replaces the context before FirstKept.
type Compaction struct {
	// Summary is the structured summary text.
	Summary string
	// FirstKept is the id of the first entry kept verbatim after the
	// summary.
	FirstKept string
	// ReadFiles and ModifiedFiles are the cumulative file sets.
	ReadFiles, ModifiedFiles []string
	// TokensBefore is the estimated context size before compaction.
	TokensBefore int64
	// Items, set by a native compaction (the provider's), replace the
	// summary in the context: the user messages it kept (ItemUserText)
	// and its opaque item (ItemCompaction). Summary is then empty.
	Items []Item
}

// Entry is one node of the conversation tree.
type Entry struct {
	// ID identifies the entry within its session.
	ID string
	// Parent is the id of the entry this one follows ("" for a root).
	Parent string
	// Time is when the entry was appended (UTC).
	Time time.Time
	// Type says which of the fields below is set.
	Type EntryType
	// RunID is the run that produced the entry, if any.
	RunID string
	// Text is the text of user, steering and follow-up entries.
	Text string
	// Attached is what a user entry's prompt carries besides its text
	// (nil: nothing; a pointer keeps the entries that have none small).
	Attached *Attached
	// Items are the output items of an assistant entry.
	Items []Item
	// StopReason is why an assistant response ended ("completed",
	// "max_output_tokens", "refusal": a message of refusal parts only).
	StopReason string
	// Result is set for tool_result entries.
	Result *ToolResult
	// Compaction is set for compaction entries.
	Compaction *Compaction
	// NativeSteering links a steering entry the provider applied
	// natively (response.steer) to its operation: the dispatch record of
	// the operation and the control's local id (nil: not native).
	NativeSteering *NativeSteering
}

// NativeSteering is a steering entry's link to its native operation.
type NativeSteering struct {
	// Operation is the id of the operation's [Dispatch] record.
	Operation string
	// LocalID is the id the run gave the steering input when it
	// accepted it.
	LocalID string
}

// Usage is provider usage of one request, known exactly.
type Usage struct {
	// RunID is the run that made the request.
	RunID string
	// RequestID is the provider's request or response id.
	RequestID string
	// Operation is the typed operation ("" or "main" for the main assistant
	// request, otherwise e.g. "compaction" or "terminal_gate").
	Operation string
	// Model is the model that served the request.
	Model string
	// Token counts as reported by the provider.
	Input, CachedInput, Output, Reasoning int64
	// CostPicodollars is the exact cost in 10^-12 dollars.
	CostPicodollars int64
	// Priced is true when the cost was computed from a price for the
	// model (a price of 0 included). Records written before it existed
	// carry none: their usage counts as priced when it has a cost.
	Priced bool
}

// UsageUncertain marks usage that is unknown, not zero: a failed or
// interrupted attempt that the provider may have accepted and billed.
// Markers are sticky; nothing clears them.
type UsageUncertain struct {
	// RunID is the run whose request is uncertain.
	RunID string
	// Operation is the typed operation, as in [Usage].
	Operation string
	// Reason says why usage is unknown (e.g. "stream_interrupted",
	// "http_5xx", "network_wait_limit").
	Reason string
	// Dispatched reports whether the request was (possibly) sent.
	Dispatched bool
	// Attempt is the attempt number within the logical turn.
	Attempt int
}

// Run outcomes recorded in a [Checkpoint].
const (
	OutcomeCompleted = "completed"
	OutcomeCancelled = "cancelled"
	OutcomeFailed    = "failed"
	OutcomeMaxTurns  = "max_turns"
)

// Checkpoint is the durable end of one run.
type Checkpoint struct {
	// RunID is the run that ended.
	RunID string
	// Outcome is completed, cancelled, failed or max_turns.
	Outcome string
	// Error describes a failure (secret-free).
	Error string
}

// DelegatedUsage mirrors the settled usage of one delegated child session
// into its root session for accounting and cost-limit checks.
type DelegatedUsage struct {
	// ChildSession is the child session id.
	ChildSession string
	// Usage is the child's known usage subtotal.
	Usage Usage
	// Uncertain reports that the child's usage is not completely known.
	Uncertain bool
}

// Record kinds as they appear in the "kind" field of each line.
const (
	KindHeader         = "header"
	KindEntry          = "entry"
	KindHead           = "head"
	KindUsage          = "usage"
	KindUsageUncertain = "usage_uncertain"
	KindCheckpoint     = "checkpoint"
	KindDelegatedUsage = "delegated_usage"
)

// Record is one line of the ledger other than the header. Kind selects
// which field is meaningful; use the constructors ([EntryRecord],
// [HeadRecord], [UsageRecord], [UncertainRecord], [CheckpointRecord],
// [DelegatedRecord]) to build them.
type Record struct {
	// Kind is one of the Kind* constants.
	Kind string
	// Entry is set for KindEntry. Missing ID and Time are filled in on
	// append and an empty Parent defaults to the head at that moment.
	Entry *Entry
	// Head is the entry id of a KindHead record.
	Head string
	// Usage is set for KindUsage.
	Usage *Usage
	// Uncertain is set for KindUsageUncertain.
	Uncertain *UsageUncertain
	// Checkpoint is set for KindCheckpoint.
	Checkpoint *Checkpoint
	// Delegated is set for KindDelegatedUsage.
	Delegated *DelegatedUsage
	// Dispatch is set for KindDispatch.
	Dispatch *Dispatch
	// Settled is set for KindDispatchSettled.
	Settled *DispatchSettled
	// Recovered is set for KindRecoveredOutput.
	Recovered *RecoveredOutput
	// Title is the new title of a KindTitle record.
	Title string
	// Approval is set for KindApproval.
	Approval *Approval
	// Reasoning is set for KindReasoning.
	Reasoning *Reasoning
}

// EntryRecord returns a record appending e.
func EntryRecord(e Entry) Record { return Record{Kind: KindEntry, Entry: &e} }

// HeadRecord returns a record moving the active head to entry id.
func HeadRecord(id string) Record { return Record{Kind: KindHead, Head: id} }

// UsageRecord returns a record of known provider usage.
func UsageRecord(u Usage) Record { return Record{Kind: KindUsage, Usage: &u} }

// UncertainRecord returns a usage-uncertainty marker record.
func UncertainRecord(u UsageUncertain) Record {
	return Record{Kind: KindUsageUncertain, Uncertain: &u}
}

// CheckpointRecord returns a run checkpoint record.
func CheckpointRecord(c Checkpoint) Record { return Record{Kind: KindCheckpoint, Checkpoint: &c} }

// DelegatedRecord returns a delegated-agent usage record.
func DelegatedRecord(d DelegatedUsage) Record {
	return Record{Kind: KindDelegatedUsage, Delegated: &d}
}

// validate reports a record that cannot be encoded.
func (r Record) validate() error {
	if err, ok := r.validateDispatch(); ok {
		return err
	}
	if err, ok := r.validateApproval(); ok {
		return err
	}
	if err, ok := r.validateReasoning(); ok {
		return err
	}
	switch r.Kind {
	case KindEntry:
		if r.Entry == nil {
			return fmt.Errorf("entry record without entry")
		}
		if r.Entry.Type == "" {
			return fmt.Errorf("entry without type")
		}
	case KindHead:
		if r.Head == "" {
			return fmt.Errorf("head record without entry id")
		}
	case KindUsage:
		if r.Usage == nil {
			return fmt.Errorf("usage record without usage")
		}
	case KindUsageUncertain:
		if r.Uncertain == nil {
			return fmt.Errorf("usage_uncertain record without marker")
		}
	case KindCheckpoint:
		if r.Checkpoint == nil {
			return fmt.Errorf("checkpoint record without checkpoint")
		}
	case KindDelegatedUsage:
		if r.Delegated == nil {
			return fmt.Errorf("delegated_usage record without usage")
		}
	case KindTitle:
		if r.Title == "" {
			return fmt.Errorf("title record without title")
		}
	default:
		return fmt.Errorf("unknown record kind %q", r.Kind)
	}
	return nil
}

// Totals is the accounting state of a session.
type Totals struct {
	// Known is the sum of all known usage: the session's own provider
	// requests plus every mirrored delegated child subtotal. When Uncertain
	// is true it is a known subtotal, not a complete total.
	Known Usage
	// Own is the session's own known provider usage.
	Own Usage
	// Requests counts own usage records.
	Requests int
	// Delegated is the sum of mirrored child subtotals.
	Delegated Usage
	// DelegatedRecords counts delegated_usage records.
	DelegatedRecords int
	// Unpriced counts the usage records (own and delegated) whose
	// tokens have no cost because the model had no price (see
	// [Usage.Priced]): Known's cost leaves them out.
	Unpriced int
	// Uncertain reports that some usage is unknown: an own marker or an
	// uncertain child. It never goes back to false.
	Uncertain bool
	// UncertainMarkers counts own usage_uncertain records.
	UncertainMarkers int
	// DelegatedUncertain counts uncertain delegated child records.
	DelegatedUncertain int
	// UnsettledDispatches counts requests another writer dispatched and
	// never settled: in flight elsewhere, or lost in a crash. They make
	// Uncertain true; a writable [Open] records them as markers.
	UnsettledDispatches int
	// Cause is the first reason usage became uncertain: the first own
	// marker, a delegated child's uncertainty (Reason
	// "delegated_uncertain"), or the first unsettled dispatch (Reason
	// [ReasonUnsettledDispatch]). It is zero when Uncertain is false.
	Cause UsageUncertain
}

// Info describes a session in a listing.
type Info struct {
	// ID, Title and Cwd come from the header.
	ID, Title, Cwd string
	// Created comes from the header, Updated from the file's mtime.
	Created, Updated time.Time
	// UsageUncertain reports an uncertainty marker in the ledger, or a
	// dispatch no record settles (a request whose writer died, or one in
	// flight now), read through its listing cache: what a reader's
	// [Session.Totals] says. It is conservative: a marker in a torn final
	// batch counts too, a settlement in one does not.
	UsageUncertain bool
	// UsageRecords counts the session's usage records, own and
	// delegated; Known sums their known usage (a subtotal when
	// UsageUncertain), as [Totals.Known] does, and UnpricedRecords counts
	// those whose usage had no price ([Totals.Unpriced]). All are read
	// through the listing cache like UsageUncertain.
	UsageRecords    int
	UnpricedRecords int
	Known           Usage
	// Path is the session file.
	Path string
	// Version is the header's format version; a session with a version
	// above [FormatVersion] is listed but refuses [Open] and [Inspect] with
	// a [VersionError].
	Version int
}

// ForeignAppend tells a writer that another writer appended to the file
// since this writer last looked. The records were folded into memory
// before this writer's own records were appended after them.
type ForeignAppend struct {
	// Records is how many complete records were folded.
	Records int
	// Entries is how many of them were entries.
	Entries int
	// Bytes is how many bytes they took.
	Bytes int64
	// HeadMoved reports whether the active head changed.
	HeadMoved bool
}
