package session

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestInspectNeverWrites checks that read-only inspection leaves a session
// byte-identical with its mtime unchanged, even with a torn tail and a
// usage-uncertainty marker whose listing cache is missing, and that a
// writable open then rebuilds the cache (mode 0600) from the ledger.
func TestInspectNeverWrites(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	if err := s.Append(UncertainRecord(UsageUncertain{RunID: "r", Operation: "main", Reason: "http_5xx", Dispatched: true})); err != nil {
		t.Fatal(err)
	}
	s.Close()
	side := listingPath(s.Path())
	if l := readListing(t, s.Path()); !l.uncertain {
		t.Fatalf("listing cache after a marker: %+v", l)
	}
	if err := os.Remove(side); err != nil {
		t.Fatal(err)
	}
	appendRaw(t, s.Path(), []byte(`{"kind":"entry","id":"half`))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(s.Path(), old, old); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, s.Path())

	r, err := Inspect(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Totals().Uncertain || r.TornBytes() == 0 || len(r.Branch()) != 1 {
		t.Fatalf("Inspect: totals %+v torn %d branch %d", r.Totals(), r.TornBytes(), len(r.Branch()))
	}
	r.Entry(r.Head())
	r.Checkpoints()
	if _, err := r.Refresh(); err != nil {
		t.Fatal(err)
	}
	if err := r.SetHead(r.Head()); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only SetHead = %v", err)
	}
	r.Close()
	var out bytes.Buffer
	if err := Export(s.Path(), &out); err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(old) {
		t.Errorf("mtime changed by read-only use: %v", fi.ModTime())
	}
	if !bytes.Equal(readFile(t, s.Path()), before) {
		t.Error("read-only use changed the file")
	}
	if _, err := os.Lstat(side); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only use created the listing cache: %v", err)
	}

	w, err := Open(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if l := readListing(t, s.Path()); !l.uncertain {
		t.Fatalf("listing cache after Open: %+v", l)
	}
}

// TestNewerFormatVersionRefused checks the contract for a header from a
// newer, incompatible writer: Open, Inspect and Export refuse with a
// VersionError that names both versions and never touch the file (not even
// its torn tail); List still lists the session with its version.
func TestNewerFormatVersionRefused(t *testing.T) {
	path, _ := sessionWith(t, 2)
	data := readFile(t, path)
	v2 := bytes.Replace(data, []byte(`"version":1,`), []byte(`"version":2,"new_field":{"x":1},`), 1)
	if bytes.Equal(v2, data) {
		t.Fatal("header has no version 1 field")
	}
	v2 = append(v2, `{"kind":"entry","id":"to`...) // torn tail
	if err := os.WriteFile(path, v2, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		s, err := open(path)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Version != 2 {
			if err == nil {
				s.Close()
			}
			t.Fatalf("%s = %v, want VersionError for version 2", name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "version 2") || !strings.Contains(msg, "supported version 1") {
			t.Errorf("%s error does not name both versions: %v", name, msg)
		}
	}
	var ve *VersionError
	if err := Export(path, &bytes.Buffer{}); !errors.As(err, &ve) {
		t.Errorf("Export = %v, want VersionError", err)
	}
	if !bytes.Equal(readFile(t, path), v2) {
		t.Fatal("a newer-version session was modified")
	}
	infos, err := List(Dir(strings.TrimSuffix(path, "/sessions/"+infosName(path))))
	if err != nil || len(infos) != 1 || infos[0].Version != 2 {
		t.Fatalf("List = %+v, %v; want the session listed with version 2", infos, err)
	}
}

func infosName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// TestExportRedactsHeaderCredentials checks credentials in HTTP header text
// other than bearer tokens.
func TestExportRedactsHeaderCredentials(t *testing.T) {
	s := newSession(t)
	secrets := []string{"dXNlcjpwYXNzd29yZA==", "c2VjcmV0OnBhc3M=", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"}
	mustAppend(t, s, Entry{Type: EntryUser, Text: `curl -H "Authorization: Basic ` + secrets[0] + `" -H 'Proxy-Authorization: Basic ` + secrets[1] + `' -H "x-api-key: ` + secrets[2] + `" https://example.com`})
	s.Close()
	var out bytes.Buffer
	if err := Export(s.Path(), &out); err != nil {
		t.Fatal(err)
	}
	for _, sec := range secrets {
		if strings.Contains(out.String(), sec) {
			t.Errorf("export leaks %q:\n%s", sec, out.String())
		}
	}
	if !strings.Contains(out.String(), "https://example.com") {
		t.Errorf("export lost the url:\n%s", out.String())
	}
}

// TestNonCanonicalEntryRefused checks that an entry whose parent comes
// after other members (the opening scanner reads only the leading ones) is
// not silently put in the tree as a root: typing the branch finds its body
// contradicting the index and refuses the file with the line.
func TestNonCanonicalEntryRefused(t *testing.T) {
	path, ids := sessionWith(t, 2)
	line := `{"kind":"entry","id":"late","time":"2026-01-01T00:00:00Z","type":"user","text":"x","parent":"` + ids[1] + `"}` + "\n"
	// Not the final line, which is scanned in full.
	appendRaw(t, path, []byte(line+`{"kind":"usage","input":1}`+"\n"))
	before := readFile(t, path)
	for name, open := range map[string]func(string) (*Session, error){"Open": Open, "Inspect": Inspect} {
		s, err := open(path)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Line != 4 {
			if err == nil {
				t.Errorf("%s: branch %v", name, branchIDs(s.Branch()))
				s.Close()
			}
			t.Fatalf("%s = %v, want CorruptError at line 4", name, err)
		}
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("file modified")
	}
}

// TestDeliveryEntriesRoundTrip checks that steering and follow-up
// deliveries are durable entries on the branch, in order, after reopening.
func TestDeliveryEntriesRoundTrip(t *testing.T) {
	s := newSession(t)
	u := mustAppend(t, s, Entry{Type: EntryUser, RunID: "r1", Text: "start"})
	st := mustAppend(t, s, Entry{Type: EntrySteering, RunID: "r1", Text: "use tabs"})
	fu := mustAppend(t, s, Entry{Type: EntryFollowUp, RunID: "r1", Text: "then run tests"})
	s.Close()
	r, err := Inspect(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Branch()
	if len(b) != 3 || b[1].ID != st.ID || b[1].Type != EntrySteering || b[1].Text != "use tabs" || b[1].Parent != u.ID ||
		b[2].ID != fu.ID || b[2].Type != EntryFollowUp || b[2].Text != "then run tests" || b[2].RunID != "r1" {
		t.Fatalf("branch %+v", b)
	}
}

// TestDamageFoundWhileTypingLeavesTornTail checks that a torn tail is cut
// only after the whole file validated: damage found while typing the
// branch (an entry body that breaks the schema) fails Open with the file,
// torn tail included, untouched.
func TestDamageFoundWhileTypingLeavesTornTail(t *testing.T) {
	path, ids := sessionWith(t, 2)
	appendRaw(t, path, []byte(`{"kind":"entry","id":"q","parent":"`+ids[1]+`","time":"yesterday","type":"user"}`+"\n"+
		`{"kind":"entry","id":"r","parent":"q","type":"user"}`+"\n"+`{"kind":"entry","id":"to`))
	before := readFile(t, path)
	var ce *CorruptError
	if _, err := Open(path); !errors.As(err, &ce) || ce.Line != 4 {
		t.Fatalf("Open = %v, want CorruptError at line 4", err)
	}
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("Open cut the torn tail of a file it refused")
	}
}

// TestAppendCutsForeignTornTail checks that a writer whose session was
// already open when another writer died mid-append cuts the dead writer's
// torn batch under the lock before appending, and is not told of any
// foreign record.
func TestAppendCutsForeignTornTail(t *testing.T) {
	s := newSession(t)
	a := mustAppend(t, s, Entry{Type: EntryUser, Text: "a"})
	good := readFile(t, s.Path())
	b1, _ := appendRecord(nil, EntryRecord(Entry{ID: "dead", Parent: a.ID, Type: EntryUser, Text: "x"}), 0, 2)
	appendRaw(t, s.Path(), b1) // the batch's second record never arrived
	var told []ForeignAppend
	s.SetForeignAppendHook(func(fa ForeignAppend) { told = append(told, fa) })
	b := mustAppend(t, s, Entry{Type: EntryUser, Text: "b"})
	want, _ := appendRecord(good, EntryRecord(b), 0, 1)
	if got := readFile(t, s.Path()); !bytes.Equal(got, want) {
		t.Fatalf("file after append:\n%s\nwant:\n%s", got, want)
	}
	if len(told) != 0 || s.ForeignAppends() != 0 {
		t.Fatalf("told of foreign appends %+v", told)
	}
	if b.Parent != a.ID {
		t.Fatalf("parent %q want %q", b.Parent, a.ID)
	}
}
