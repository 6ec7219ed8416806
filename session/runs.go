package session

import (
	"errors"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"syscall"
)

// Every driven run ends with one checkpoint. A run whose process died
// (crash, kill) or could not write its checkpoint (a full disk, a file
// system gone read-only) has none: it made requests (its dispatch
// records name it) but no checkpoint names it. Such runs are open runs;
// [Session.OpenRuns] lists them, and a writable [Open] that is the
// session's only live writer records their end: a checkpoint with
// outcome failed (the real one is unknown) and error
// [ReasonRunUnrecorded].

// ReasonRunUnrecorded is the [Checkpoint.Error] of the checkpoint a
// writable [Open] writes for a run that has none.
const ReasonRunUnrecorded = "the run ended without a checkpoint: octet stopped (a crash or kill) or could not write the session (a full disk, a read-only file system) before the run was settled; recorded when the session was next opened for writing"

// noteRun folds the run id of a dispatch or checkpoint record into the
// open runs: a dispatch opens its run (once), a checkpoint closes it.
func (ix *index) noteRun(kind, runID string) {
	if runID == "" {
		return
	}
	i := slices.Index(ix.openRuns, runID)
	switch {
	case kind == KindDispatch && i < 0:
		ix.openRuns = append(ix.openRuns, strings.Clone(runID))
	case kind == KindCheckpoint && i >= 0:
		ix.openRuns = slices.Delete(ix.openRuns, i, i+1)
	}
}

// noteRunLine is noteRun for a dispatch or checkpoint line being folded:
// its run id is decoded into a reused buffer (no allocation unless the
// run is new).
func (ix *index) noteRunLine(kind string, line []byte) error {
	a := strAlloc{buf: ix.runBuf[:0]}
	r, err := decodeBody(kind, line, &a, &ix.scratch)
	if err != nil {
		return err
	}
	if cap(a.buf) > cap(ix.runBuf) {
		ix.runBuf = a.buf[:0]
	}
	switch {
	case r.Dispatch != nil:
		ix.noteRun(kind, r.Dispatch.RunID)
	case r.Checkpoint != nil:
		ix.noteRun(kind, r.Checkpoint.RunID)
	}
	return nil
}

// OpenRuns returns the runs that made requests but have no checkpoint,
// in the order they started: runs in progress (this writer's or another
// live one's), and runs that ended without their checkpoint.
func (s *Session) OpenRuns() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ix.openRuns)
}

// unrecordedCheckpoints returns the checkpoints a writable Open, alone,
// writes for the runs that ended without one.
func (s *Session) unrecordedCheckpoints() []Record {
	var recs []Record
	for _, id := range s.ix.openRuns {
		slog.Warn("session: a run ended without its checkpoint; recording it as failed", "path", s.path, "run", id)
		recs = append(recs, CheckpointRecord(Checkpoint{RunID: id, Outcome: "failed", Error: ReasonRunUnrecorded}))
	}
	return recs
}

// WriteFailureAdvice says what a person can do about err, an error
// writing a session (or anything beside it under OCTET_HOME), naming its
// real cause: a full disk, a read-only file system, missing permission,
// or a session at its size limits. It is "" for any other error.
func WriteFailureAdvice(err error) string {
	switch {
	case errors.As(err, new(*LimitError)):
		return "the session is full: start a new session"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "the disk holding OCTET_HOME is full (or its quota is reached): free disk space"
	case errors.Is(err, syscall.EROFS):
		return "the file system holding OCTET_HOME is read-only: make it writable again (remount it read-write, or check it for errors)"
	case errors.Is(err, fs.ErrPermission):
		return "octet may not write under OCTET_HOME: check the permissions of its files and directories"
	}
	return ""
}
