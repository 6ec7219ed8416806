package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

const (
	diffUsage   = "octet sessions diff <id> [--run <runId>]"
	rewindUsage = "octet sessions rewind <id> <entry> [--files] [--conversation] [--dry-run] [--force <path>]..."
)

// parseInterleaved parses flags of fs that may come before, between or
// after the positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// changeRecorder returns the recorder of workspace's change store under
// home, redacting every provider key octet can find (config.KnownKeys)
// from diffs.
// With readOnly the store is only read (changes.InspectWorkspace).
func changeRecorder(home, workspace string, lookup func(string) (string, bool), readOnly bool) (*changes.Recorder, error) {
	open := changes.OpenWorkspace
	if readOnly {
		open = changes.InspectWorkspace
	}
	store, err := open(home, workspace, 0)
	if err != nil {
		return nil, err
	}
	rec := &changes.Recorder{Store: store}
	var keys []string
	for _, k := range config.KnownKeys(home, lookup) {
		keys = append(keys, k.Reveal())
	}
	if len(keys) > 0 {
		rec.Redact = tools.NewRedactor(keys...).String
	}
	return rec, nil
}

// sessionsDiff prints what octet's tools changed in one run of a session
// (the last by default), one diff per path.
func sessionsDiff(_ context.Context, args []string, e env) error {
	fs := newFlagSet("sessions diff", diffUsage, e.stdout)
	run := fs.String("run", "", "the `runId` to show, or an unambiguous prefix of it (default: the last run)")
	pos, err := parseSub(fs, diffUsage, args, 1)
	if err != nil {
		return err
	}
	home, dir, err := sessionsDir(e)
	if err != nil {
		return err
	}
	sess, err := openForRewind(dir, pos[0], true)
	if err != nil {
		return err
	}
	defer sess.Close()
	rec, err := changeRecorder(home, sess.Header().Cwd, e.lookup, true)
	if err != nil {
		return err
	}
	if *run != "" {
		if *run, err = resolveRun(sess, *run); err != nil {
			return err
		}
	}
	chs, runID, err := host.Diff(sess, rec, *run)
	if err != nil {
		return fmt.Errorf("diff of session %s: %w", sess.Header().ID, err)
	}
	if runID == "" {
		fmt.Fprintf(e.stdout, "session %s has no run yet\n", sess.Header().ID)
		return nil
	}
	fmt.Fprintf(e.stdout, "run %s changed %d file(s)\n", runID, len(chs))
	for _, c := range chs {
		printChange(e.stdout, c, "")
	}
	return nil
}

// sessionsRewind rewinds a session's files and/or conversation to an
// entry, printing a preview of every path (a dry run changes nothing).
func sessionsRewind(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("sessions rewind", rewindUsage, e.stdout)
	var p host.RewindParams
	fs.BoolVar(&p.Files, "files", false, "restore the files octet changed after the entry (default when --conversation is not given)")
	fs.BoolVar(&p.Conversation, "conversation", false, "move the session's head back to the entry")
	fs.BoolVar(&p.DryRun, "dry-run", false, "show what would change and change nothing")
	fs.Func("force", "overwrite `path` even though it changed since octet's last change of it (repeatable)", func(s string) error {
		p.Force = append(p.Force, s)
		return nil
	})
	pos, err := parseSub(fs, rewindUsage, args, 2)
	if err != nil {
		return err
	}
	if !p.Conversation {
		p.Files = true
	}
	home, dir, err := sessionsDir(e)
	if err != nil {
		return err
	}
	// A dry run only reads: it must neither change the session (nor
	// record another process's request in flight as unsettled) nor need
	// a writable OCTET_HOME.
	sess, err := openForRewind(dir, pos[0], p.DryRun)
	if err != nil {
		return err
	}
	defer sess.Close()
	p.SessionID = sess.Header().ID
	if !p.DryRun && runningElsewhere(sess) {
		// octet/session/rewind refuses a session with an active run; so
		// does the CLI, or the run would go on from the rewound entry
		// (its answer under the wrong prompt) on files restored under it.
		return &exitError{code: exitFailed, err: fmt.Errorf("session %s has a run in progress in another process (an editor, or a running octet exec); wait for it to end, or stop it, then rewind again", p.SessionID)}
	}
	if p.EntryID, err = resolveEntry(sess, pos[1]); err != nil {
		return err
	}
	rec, err := changeRecorder(home, sess.Header().Cwd, e.lookup, p.DryRun)
	if err != nil {
		return err
	}
	res, err := host.RewindLedger(ctx, sess, rec, p)
	if err != nil {
		return fmt.Errorf("rewind session %s: %w", p.SessionID, err)
	}
	printRewind(e.stdout, p, res)
	if !p.DryRun && !res.Applied {
		return &exitError{code: exitFailed, err: fmt.Errorf("the rewind was not completed (see the paths above); run it again to finish it")}
	}
	return nil
}

// runningElsewhere reports whether sess, open for writing, has a run in
// progress in another process: one without its checkpoint while another
// writer has the file open (a writable Open that found itself alone
// would have recorded the end of a run whose process is gone). Where the
// platform cannot tell whether another writer is live, it reports false.
func runningElsewhere(sess *session.Session) bool {
	live, err := sess.WriterLive()
	return err == nil && live && len(sess.OpenRuns()) > 0
}

// resolveEntry maps an entry id of sess, or an unambiguous prefix of one
// (of any branch), to the full id.
func resolveEntry(sess *session.Session, id string) (string, error) {
	sid := sess.Header().ID
	return matchPrefix(id, sess.EntryIDs(), "entry", "entries",
		fmt.Sprintf("no entry %q in session %s (octet sessions show %s lists the entry ids)", visible(id), sid, sid))
}

// resolveRun maps a run id of sess's active branch, or an unambiguous
// prefix of one, to the full id.
func resolveRun(sess *session.Session, id string) (string, error) {
	var runs []string
	for _, en := range sess.Branch() {
		if en.RunID != "" && !slices.Contains(runs, en.RunID) {
			runs = append(runs, en.RunID)
		}
	}
	sid := sess.Header().ID
	return matchPrefix(id, runs, "run", "runs",
		fmt.Sprintf("no run %q on the active branch of session %s (octet sessions show %s lists its runs)", visible(id), sid, sid))
}

// openForRewind opens the session id (or an unambiguous prefix) for
// writing, or with readOnly for reading only (session.Inspect: shared
// lock, no repair, nothing recorded).
func openForRewind(dir, id string, readOnly bool) (*session.Session, error) {
	if !readOnly {
		return openSession(dir, id) // saying why it cannot be written
	}
	path, err := resolveReadable(dir, id)
	if err != nil {
		return nil, err
	}
	sess, err := session.Inspect(path)
	if err != nil {
		return nil, readError("read session "+strings.TrimSuffix(filepath.Base(path), ".jsonl"), err)
	}
	return sess, nil
}

// printRewind prints the readable preview (or report) of a rewind.
func printRewind(out io.Writer, p host.RewindParams, res host.RewindResult) {
	var what []string
	if p.Files {
		what = append(what, "files")
	}
	if p.Conversation {
		what = append(what, "conversation")
	}
	verb := "rewound"
	if p.DryRun {
		verb = "dry run (nothing changed): would rewind"
	}
	conflicts, forceable := 0, false
	for _, c := range res.Changes {
		if c.Conflict != "" {
			conflicts++
			forceable = forceable || tools.Forceable(c.Conflict)
		}
	}
	fmt.Fprintf(out, "%s %s of session %s to entry %s: %d path(s), %d conflict(s)\n",
		verb, strings.Join(what, " and "), p.SessionID, visible(p.EntryID), len(res.Changes)-conflicts, conflicts)
	for _, c := range res.Changes {
		fmt.Fprintf(out, "  %-8s %s\n", rewindLabel(c), visible(c.Path))
	}
	if len(res.Expired) > 0 {
		fmt.Fprintf(out, "no longer rewindable (their checkpoints expired from the change store): entries %s\n", visible(strings.Join(res.Expired, ", ")))
	}
	for _, c := range res.Changes {
		note := ""
		if c.Conflict != "" {
			note = "left as it is: " + c.Conflict
		}
		printChange(out, c.Change, note)
	}
	if forceable {
		fmt.Fprintln(out, "\nto overwrite a path whose conflict says to force it, run the rewind again with --force <path> (repeatable)")
	}
	if p.Conversation && !p.DryRun {
		fmt.Fprintf(out, "head: %s\n", visible(res.Head))
	}
	if res.RewindEntryID != "" {
		fmt.Fprintf(out, "recorded as entry %s (rewind to its parent to undo)\n", res.RewindEntryID)
	}
}

// rewindLabel is a change's short label in the preview's list.
func rewindLabel(c host.RewindChange) string {
	if c.Conflict != "" {
		return "conflict"
	}
	switch c.Kind {
	case changes.Add:
		return "create"
	case changes.Delete:
		return "delete"
	}
	return "restore"
}

// printChange prints one path's diff (or summary line) under a header.
func printChange(out io.Writer, c changes.Change, note string) {
	fmt.Fprintf(out, "\n== %s (%s)\n", visible(c.Path), c.Kind)
	if note != "" {
		fmt.Fprintln(out, visible(note))
	}
	fmt.Fprint(out, visible(c.Diff))
	if !strings.HasSuffix(c.Diff, "\n") {
		fmt.Fprintln(out)
	}
}
