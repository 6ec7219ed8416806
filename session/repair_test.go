package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sessionWith creates a closed session file holding n user entries and
// returns its path and the ids.
func sessionWith(t *testing.T, n int) (string, []string) {
	t.Helper()
	s := newSession(t)
	var ids []string
	for i := range n {
		ids = append(ids, mustAppend(t, s, Entry{Type: EntryUser, Text: fmt.Sprintf("message %d", i)}).ID)
	}
	s.Close()
	return s.Path(), ids
}

func appendRaw(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTornTailRepairedByOpenNotInspect(t *testing.T) {
	full, err := appendRecord(nil, EntryRecord(Entry{ID: "torn", Type: EntryUser, Text: strings.Repeat("x", 200)}), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := appendRecord(nil, EntryRecord(Entry{ID: "b1", Type: EntryAssistant, Items: []Item{{Type: ItemText, Text: "hi"}}}), 0, 2)
	batch2, _ := appendRecord(nil, UsageRecord(Usage{Input: 1}), 1, 2)
	tails := map[string][]byte{
		"prefix without newline": full[:len(full)/2],
		"nul bytes":              bytes.Repeat([]byte{0}, 64),
		"nul line with newline":  append(bytes.Repeat([]byte{0}, 64), '\n'),
		"garbage line":           []byte("{\"kind\":\"entry\",\"id\n"),
		"torn batch":             append(append([]byte{}, batch...), batch2[:10]...),
		"batch missing records":  batch,
		"batch cut at a line boundary": func() []byte {
			b, _ := appendRecord(nil, EntryRecord(Entry{ID: "b1", Type: EntryUser, Text: "x"}), 0, 3)
			b, _ = appendRecord(b, UsageRecord(Usage{Input: 1}), 1, 3)
			return b
		}(),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			path, ids := sessionWith(t, 3)
			good := readFile(t, path)
			appendRaw(t, path, tail)
			damaged := readFile(t, path)

			r, err := Inspect(path)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if got := branchIDs(r.Branch()); !cmp.Equal(got, ids) {
				t.Errorf("Inspect branch %v, want %v", got, ids)
			}
			if r.TornBytes() != int64(len(tail)) {
				t.Errorf("TornBytes = %d, want %d", r.TornBytes(), len(tail))
			}
			r.Close()
			if !bytes.Equal(readFile(t, path), damaged) {
				t.Fatal("Inspect modified the file")
			}

			w, err := Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(readFile(t, path), good) {
				t.Fatal("Open did not truncate the torn tail exactly")
			}
			e := mustAppend(t, w, Entry{Type: EntryUser, Text: "after repair"})
			w.Close()
			r, err = Inspect(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := branchIDs(r.Branch()); !cmp.Equal(got, append(ids, e.ID)) || r.TornBytes() != 0 {
				t.Errorf("after repair: branch %v torn %d", got, r.TornBytes())
			}
		})
	}
}

func TestDamageInTheMiddleRefused(t *testing.T) {
	cases := map[string]func([]byte) []byte{
		"broken json": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines[2] = []byte("{\"kind\":\"entry\",\"id\":\"x\n") // line 3
			return bytes.Join(lines, nil)
		},
		"nul bytes": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines[2] = append(bytes.Repeat([]byte{0}, 20), '\n')
			return bytes.Join(lines, nil)
		},
		"unknown parent": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines[2] = []byte(`{"kind":"entry","id":"q","parent":"nope","type":"user"}` + "\n")
			return bytes.Join(lines, nil)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			path, _ := sessionWith(t, 4)
			bad := damage(readFile(t, path))
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			for opener, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
				_, err := open(path)
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Line != 3 {
					t.Fatalf("%s: err = %v, want CorruptError at line 3", opener, err)
				}
				if !strings.Contains(err.Error(), ":3 ") {
					t.Errorf("%s: message does not name line 3: %v", opener, err)
				}
				if !bytes.Equal(readFile(t, path), bad) {
					t.Fatalf("%s modified a damaged file", opener)
				}
			}
		})
	}
	// A final line that parses but breaks the tree is damage, not a torn
	// tail: it is refused, never truncated.
	path, _ := sessionWith(t, 2)
	appendRaw(t, path, []byte(`{"kind":"head","head":"missing"}`+"\n"))
	before := readFile(t, path)
	var ce *CorruptError
	if _, err := Open(path); !errors.As(err, &ce) || ce.Line != 4 {
		t.Fatalf("Open = %v, want CorruptError at line 4", err)
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("Open truncated a complete final record")
	}
}

// TestDamagedBatchMarkRefused checks that a damaged batch mark cannot pass
// for a torn final batch: complete, acknowledged records after (or inside)
// the batch are never truncated; Open and Inspect refuse with the line.
func TestDamagedBatchMarkRefused(t *testing.T) {
	cases := []struct {
		name string
		// from, to rewrite the file; more: whether a single record follows
		// the batch.
		from, to string
		more     bool
		line     int
	}{
		{"mark grown, batch in the middle", `"batch":2`, `"batch":9`, true, 5},
		{"mark grown, final batch", `"batch":2`, `"batch":3`, false, 5},
		{"mark lost", `"batch":2`, `"batch":1`, true, 5},
		{"member mark damaged, final batch", `"batch_of":2`, `"batch_of":7`, false, 5},
		{"member index damaged", `"batch_index":2`, `"batch_index":3`, false, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(t)
			mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
			mustAppend(t, s, Entry{Type: EntryUser, Text: "b"})
			if err := s.Append(EntryRecord(Entry{Type: EntryAssistant, Items: []Item{{Type: ItemText, Text: "c"}}}), UsageRecord(Usage{Input: 3})); err != nil {
				t.Fatal(err)
			}
			if c.more {
				mustAppend(t, s, Entry{Type: EntryUser, Text: "d"})
			}
			s.Close()
			data := readFile(t, s.Path())
			if bytes.Count(data, []byte(c.from)) != 1 {
				t.Fatalf("file does not hold %s once:\n%s", c.from, data)
			}
			bad := bytes.Replace(data, []byte(c.from), []byte(c.to), 1)
			if err := os.WriteFile(s.Path(), bad, 0o600); err != nil {
				t.Fatal(err)
			}
			for opener, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
				r, err := open(s.Path())
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Line != c.line {
					if err == nil {
						r.Close()
					}
					t.Fatalf("%s = %v, want CorruptError at line %d", opener, err, c.line)
				}
				if !bytes.Equal(readFile(t, s.Path()), bad) {
					t.Fatalf("%s modified the file", opener)
				}
			}
		})
	}
}

func TestFailedWriteLeavesFileAndMemory(t *testing.T) {
	faults := map[string]func(){
		"short write": func() {
			writeAt = func(f *os.File, b []byte, off int64) (int, error) {
				n, _ := f.WriteAt(b[:len(b)/2], off)
				return n, errors.New("disk full")
			}
		},
		"sync failure": func() {
			syncData = func(f *os.File) error { return errors.New("EIO") }
		},
	}
	for name, inject := range faults {
		t.Run(name, func(t *testing.T) {
			s := newSession(t)
			mustAppend(t, s, Entry{Type: EntryUser, Text: "kept"})
			before := readFile(t, s.Path())
			branch, totals, head := s.Branch(), s.Totals(), s.Head()
			origWrite, origSync := writeAt, syncData
			inject()
			err := s.Append(EntryRecord(Entry{Type: EntryAssistant, Items: []Item{{Type: ItemText, Text: "lost"}}}), UsageRecord(Usage{Input: 10}))
			writeAt, syncData = origWrite, origSync
			if err == nil {
				t.Fatal("append succeeded despite the fault")
			}
			if !bytes.Equal(readFile(t, s.Path()), before) {
				t.Fatal("file not restored after a failed append")
			}
			if !cmp.Equal(s.Branch(), branch) || s.Totals() != totals || s.Head() != head {
				t.Fatal("memory changed after a failed append")
			}
			e := mustAppend(t, s, Entry{Type: EntryUser, Text: "next"})
			if e.Parent != head {
				t.Fatalf("next append parent %q want %q", e.Parent, head)
			}
		})
	}
}
