// Package session is octet's durable session ledger: an append-only JSONL
// file per session that holds every complete semantic record the agent
// commits — conversation entries, head updates, provider usage,
// usage-uncertainty markers, run checkpoints and delegated-agent usage.
//
// # File format
//
// The first line is a versioned header ({"kind":"header","version":1,...}).
// Every further line is one record whose "kind" names its type; the records
// of one multi-record append carry batch marks ("batch" on the first,
// "batch_of" and "batch_index" on the others) so a reader folds the batch
// whole or, if a crash cut it short, not at all. Entries
// form a parent-linked tree; the latest durable head (an appended entry or a
// head record) selects the active branch, so branching at any entry is just
// a head update and nothing is ever deleted. Compaction adds a summary entry
// and never removes ancestry. Record kinds this version does not know
// (written by a newer writer) are kept in the file and skipped.
//
// # Durability and concurrency
//
// Every append takes an advisory exclusive flock, compares the file length
// it observes under the lock with the length this writer last saw, folds any
// complete records another writer appended in between (reporting them
// through [Session.SetForeignAppendHook] and [Session.ForeignAppends]),
// writes the complete batch of records with one write, calls fdatasync and
// only then updates in-memory state. A failed write or sync truncates the
// file back to its previous length and leaves memory unchanged.
//
// Every writer also holds a shared holder lock while the session is open
// (hold.go); [Remove] refuses, with an [InUseError], a session any writer
// holds, and [Session.EntryIDs] lists the ids a command resolves prefixes
// against.
//
// [Open] repairs a torn final record (the tail of a writer killed mid-write)
// under the exclusive lock; damage anywhere else is a [CorruptError] naming
// the line and the file is left untouched. [Inspect] takes a shared lock,
// never writes and merely reports a torn tail through [Session.TornBytes].
//
// Parsing is bounded: [MaxFileBytes], [MaxRecords] and [MaxRecordBytes]
// each fail with a [LimitError] naming the limit.
//
// # Cost of opening
//
// Opening indexes the file with a cheap scanner that reads only the fields
// it needs (kind, id, parent, head and the small accounting records) and
// keeps offsets rather than bytes. Entries are decoded into typed values
// only when [Session.Branch] or [Session.Entry] asks for them; the active
// branch stays typed while the session is in use, until
// [Session.Release], and is then typed again from the file (checked
// against a digest of each line) when asked for.
//
// A Session is safe for use by several goroutines; the package never writes
// to stdout.
package session
