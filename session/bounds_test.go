package session

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// lowerLimits sets test limits and restores the real ones afterwards.
func lowerLimits(t *testing.T, fileBytes int64, records, recordBytes int) {
	t.Helper()
	saved := limits
	limits.fileBytes, limits.records, limits.recordBytes = fileBytes, records, recordBytes
	t.Cleanup(func() { limits = saved })
}

func wantLimit(t *testing.T, err error, limit, text string) *LimitError {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != limit {
		t.Fatalf("err = %v, want LimitError for %q", err, limit)
	}
	if !strings.Contains(err.Error(), text) {
		t.Fatalf("error %q does not name the limit %q", err, text)
	}
	return le
}

func TestRealFileByteLimit(t *testing.T) {
	path, _ := sessionWith(t, 2)
	// A sparse file one byte over 256 MiB: no data is written.
	if err := os.Truncate(path, MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		_, err := open(path)
		le := wantLimit(t, err, "file bytes", "256 MiB")
		if le.Got != MaxFileBytes+1 {
			t.Errorf("%s: Got = %d", name, le.Got)
		}
	}
	if fi, _ := os.Stat(path); fi.Size() != MaxFileBytes+1 {
		t.Fatal("an over-limit file was modified")
	}
}

func TestFileByteLimitOnAppend(t *testing.T) {
	lowerLimits(t, 2048, MaxRecords, MaxRecordBytes)
	s := newSession(t)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = s.AppendEntry(Entry{Type: EntryUser, Text: strings.Repeat("x", 100)})
	}
	wantLimit(t, err, "file bytes", "2048 bytes")
	size := s.Size()
	if fi, _ := os.Stat(s.Path()); fi.Size() != size {
		t.Fatalf("file is %d bytes, session says %d", fi.Size(), size)
	}
	s.Close()
	if _, err := Open(s.Path()); err != nil {
		t.Fatalf("a session at its limit must still open: %v", err)
	}
}

func TestRecordCountLimit(t *testing.T) {
	lowerLimits(t, MaxFileBytes, 10, MaxRecordBytes)
	s := newSession(t)
	var err error
	n := 0
	for ; n < 20 && err == nil; n++ {
		err = s.Append(UsageRecord(Usage{Input: 1}))
	}
	le := wantLimit(t, err, "records", "10 records")
	if s.Records() != 10 || le.Got != 11 {
		t.Fatalf("records %d, Got %d", s.Records(), le.Got)
	}
	// A batch that would cross the limit is refused whole.
	s.Close()

	limits.records = 1000
	path, _ := sessionWith(t, 12)
	limits.records = 10
	_, err = Inspect(path)
	le = wantLimit(t, err, "records", "10 records")
	if le.Line != 11 {
		t.Fatalf("Line = %d, want 11", le.Line)
	}
}

func TestRecordByteLimit(t *testing.T) {
	lowerLimits(t, MaxFileBytes, MaxRecords, 1024)
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "small"})
	before := readFile(t, s.Path())
	_, err := s.AppendEntry(Entry{Type: EntryUser, Text: strings.Repeat("y", 2000)})
	wantLimit(t, err, "record bytes", "1024 bytes")
	if !bytes.Equal(readFile(t, s.Path()), before) {
		t.Fatal("an oversized record reached the file")
	}
	s.Close()

	// A file holding an oversized line (written under a larger limit).
	limits.recordBytes = 1 << 20
	path, _ := sessionWith(t, 1)
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, Entry{Type: EntryUser, Text: strings.Repeat("z", 5000)})
	mustAppend(t, w, Entry{Type: EntryUser, Text: "after"})
	w.Close()
	limits.recordBytes = 1024
	for _, open := range []func(string) (*Session, error){Open, Inspect} {
		_, err = open(path)
		le := wantLimit(t, err, "record bytes", "1024 bytes")
		if le.Line != 3 {
			t.Fatalf("Line = %d, want 3", le.Line)
		}
	}
	// The real per-record limit is documented in the error too.
	if got := (&LimitError{Path: "p", Limit: "record bytes", Max: MaxRecordBytes, Got: MaxRecordBytes + 1}).Error(); !strings.Contains(got, "64 MiB") {
		t.Fatalf("message %q", got)
	}
}
