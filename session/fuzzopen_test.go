package session

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzOpen feeds arbitrary bytes after a valid header to Inspect and Open.
// Neither may panic; Inspect never changes the file; Open either fails and
// leaves the file untouched, or succeeds having at most cut a torn tail (the
// file is a prefix of what it was) and recorded unsettled dispatches (one
// batch of markers and settlements after that prefix), and then agrees
// with Inspect.
func FuzzOpen(f *testing.F) {
	hdr := appendHeader(nil, Header{ID: "fuzz", Version: FormatVersion, Cwd: "/w"})
	e1, _ := appendRecord(nil, EntryRecord(Entry{ID: "a", Type: EntryUser, Text: "hi"}), 0, 1)
	b1, _ := appendRecord(nil, EntryRecord(Entry{ID: "b", Parent: "a", Type: EntryAssistant, Items: []Item{{Type: ItemText, Text: "yo"}}}), 0, 2)
	b2, _ := appendRecord(nil, UsageRecord(Usage{Input: 3}), 1, 2)
	h, _ := appendRecord(nil, HeadRecord("a"), 0, 1)
	body := bytes.Join([][]byte{e1, b1, b2, h}, nil)
	f.Add(body)
	f.Add(body[:len(body)-5])
	f.Add(append(append([]byte{}, e1...), b1...))
	f.Add(bytes.Replace(body, []byte(`"batch":2`), []byte(`"batch":3`), 1))
	f.Add([]byte(`{"kind":"future","batch":2}` + "\n" + `{"kind":"future2","batch_of":2,"batch_index":2}` + "\n"))
	f.Add([]byte("\x00\x00\n"))
	d, _ := appendRecord(nil, DispatchRecord(Dispatch{ID: "d1", RunID: "r"}), 0, 1)
	f.Add(bytes.Join([][]byte{e1, d}, nil))
	f.Fuzz(func(t *testing.T, tail []byte) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		orig := append(append([]byte{}, hdr...), tail...)
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		var inspected []string
		if r, err := Inspect(path); err == nil {
			inspected = branchIDs(r.Branch())
			r.Close()
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, orig) {
			t.Fatal("Inspect changed the file")
		}
		w, err := Open(path)
		got, _ := os.ReadFile(path)
		if err != nil {
			if !bytes.Equal(got, orig) {
				t.Fatalf("Open failed (%v) and changed the file", err)
			}
			return
		}
		defer w.Close()
		got = withoutSettlement(got)
		if !bytes.HasPrefix(orig, got) || len(got) < len(hdr) {
			t.Fatalf("Open left %q, not a prefix of %q", got, orig)
		}
		if ids := branchIDs(w.Branch()); !cmp.Equal(ids, inspected) {
			t.Fatalf("Open branch %v, Inspect branch %v", ids, inspected)
		}
	})
}

// withoutSettlement drops the batch Open appends for unsettled dispatches
// (usage_uncertain markers and dispatch_settled lines at the end) and
// runs left without a checkpoint.
func withoutSettlement(b []byte) []byte {
	for len(b) > 0 {
		i := bytes.LastIndexByte(b[:len(b)-1], '\n')
		line := b[i+1:]
		if !bytes.Contains(line, []byte(`"reason":"unsettled_dispatch"`)) && !bytes.HasPrefix(line, []byte(`{"kind":"dispatch_settled"`)) &&
			!bytes.Contains(line, []byte(ReasonRunUnrecorded)) {
			return b
		}
		b = b[:i+1]
	}
	return b
}
