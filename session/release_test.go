package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/octet-agent/octet/internal/heaptest"
)

// releaseFixture appends turns with large texts (tool outputs with
// escapes, encrypted reasoning, call arguments), a branch left behind and
// a compaction, and returns the session.
func releaseFixture(t testing.TB, turns int) *Session {
	t.Helper()
	s, err := Create(t.TempDir(), Header{Cwd: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	out := strings.Repeat("line \"quoted\"\t<tag> & é \u2028 of a build log\n", 120)
	for i := range turns {
		call := fmt.Sprintf("call_%d", i)
		recs := []Record{
			EntryRecord(Entry{Type: EntryUser, Text: fmt.Sprintf("step %d", i)}),
			EntryRecord(Entry{Type: EntryAssistant, StopReason: "tool_calls", Items: []Item{
				{Type: ItemReasoning, Text: "think", EncryptedContent: strings.Repeat(fmt.Sprintf("gAAA%d", i), 700)},
				{Type: ItemFunctionCall, CallID: call, Name: "bash", Arguments: fmt.Sprintf(`{"command":"echo %s"}`, strings.Repeat("x", 5000))},
			}}),
			EntryRecord(Entry{Type: EntryToolResult, Result: &ToolResult{CallID: call, Tool: "bash", Text: out, Details: map[string]any{"exit": float64(i)}}}),
		}
		if err := s.Append(recs...); err != nil {
			t.Fatal(err)
		}
		if i == turns/2 {
			if err := s.SetHead(s.Branch()[3].ID); err != nil { // what follows leaves the branch
				t.Fatal(err)
			}
		}
	}
	return s
}

// TestReleaseTypesTheSameBranch: a released branch is typed again from
// the file exactly as it was kept — the same entries, texts and details
// — through Branch, LoadBranch, Entry and Head, after foreign appends
// folded while released, and an append afterwards keeps it again.
func TestReleaseTypesTheSameBranch(t *testing.T) {
	s := releaseFixture(t, 40)
	kept := s.Branch()
	head := s.Head()
	s.Release()
	if got := s.Branch(); !reflect.DeepEqual(got, kept) {
		t.Fatalf("released branch typed again differs: %d entries, want %d", len(got), len(kept))
	}
	if s.Head() != head {
		t.Errorf("Head %q after Release, want %q", s.Head(), head)
	}
	for _, e := range kept {
		if got, ok := s.Entry(e.ID); !ok || !reflect.DeepEqual(got, e) {
			t.Errorf("Entry(%s) after Release differs", e.ID)
		}
	}
	// Another writer appends while this one is released.
	other, err := Open(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.AppendEntry(Entry{Type: EntryUser, Text: strings.Repeat("foreign ", 1000)})
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	want := append(kept[:len(kept):len(kept)], foreign)
	if got, err := s.LoadBranch(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a foreign append: %d entries, %v; want %d", len(got), err, len(want))
	}
	own, err := s.AppendEntry(Entry{Type: EntryUser, Text: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ix.cold {
		t.Error("an append left the branch released")
	}
	want = append(want, own)
	if got := s.Branch(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after an own append: %d entries, want %d", len(got), len(want))
	}
	reopened, err := Inspect(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := reopened.Branch(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the file's branch differs from the kept one")
	}
}

// TestReleasedBranchChangedOnDisk: a session file rewritten in place or
// cut behind a session that released its branch is found out when the
// branch is typed again: LoadBranch and BranchBefore fail with a
// ChangedError that says what to do, Branch returns nothing (never other
// text), and appends are refused from then on.
func TestReleasedBranchChangedOnDisk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string, size int64)
	}{
		{"rewritten in place", func(t *testing.T, path string, size int64) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.LastIndex(b, []byte("of a build log"))
			copy(b[i:], "of a BUILD log") // same length, same inode
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size/2); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := releaseFixture(t, 10)
			s.Release()
			tc.change(t, s.Path(), s.Size())
			_, err := s.LoadBranch()
			var ce *ChangedError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "changed on disk") || !strings.Contains(err.Error(), "open it again") {
				t.Fatalf("LoadBranch of a changed file: %v, want a ChangedError saying what to do", err)
			}
			if b := s.Branch(); b != nil {
				t.Errorf("Branch of a changed file returned %d entries", len(b))
			}
			if _, _, _, err := s.BranchBefore("", 5); !errors.As(err, &ce) {
				t.Errorf("BranchBefore of a changed file: %v", err)
			}
			if _, err := s.AppendEntry(Entry{Type: EntryUser, Text: "more"}); !errors.As(err, &ce) {
				t.Errorf("append to a changed file: %v, want the ChangedError", err)
			}
		})
	}
}

// TestReleasedSessionHeap: a session that released its branch holds a
// small part of its file in the heap (its index), where a kept branch
// holds about the file's size.
func TestReleasedSessionHeap(t *testing.T) {
	if !heaptest.OwnProcess(t) {
		return
	}
	s := releaseFixture(t, 200)
	path := s.Path()
	s.Close()
	heap := heaptest.Live
	h0 := heap()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h1 := heap()
	s.Release()
	h2 := heap()
	size := float64(s.Size())
	kept, released := float64(h1-h0)/size, float64(h2-h0)/size
	t.Logf("%d-byte session: %.2f of its size in the heap kept, %.3f released", s.Size(), kept, released)
	if kept < 0.5 {
		t.Errorf("a kept branch holds only %.2f of its file: the measure is wrong", kept)
	}
	if released > 0.05 {
		t.Errorf("a released session holds %.3f of its file in the heap, want ≤ 0.05", released)
	}
	if n := unsafe.Sizeof(entMeta{}); n != 32 {
		t.Errorf("an entry's index slot is %d bytes, want 32 (BenchmarkOpenBranch's peak RSS)", n)
	}
}
