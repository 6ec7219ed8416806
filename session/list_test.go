package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHomeAndDir(t *testing.T) {
	t.Setenv("OCTET_HOME", "/x/y")
	if Home() != "/x/y" || Dir(Home()) != "/x/y/sessions" {
		t.Fatalf("Home %q Dir %q", Home(), Dir(Home()))
	}
	t.Setenv("OCTET_HOME", "")
	t.Setenv("HOME", "/home/u")
	if Home() != "/home/u/.octet" {
		t.Fatalf("default Home %q", Home())
	}
}

func TestList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	if infos, err := List(dir); err != nil || len(infos) != 0 {
		t.Fatalf("List(missing) = %v, %v", infos, err)
	}
	a, err := Create(dir, Header{Title: "alpha", Cwd: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(dir, Header{Title: "beta", Cwd: "/b"})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, Entry{Type: EntryUser, Text: "hi"})
	if err := b.Append(UncertainRecord(UsageUncertain{Reason: "stream_interrupted", Dispatched: true})); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if _, err := Create(dir, Header{ID: b.Header().ID}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing session = %v", err)
	}
	// Listing reads only the header: damage further down does not matter
	// (and is not detected) here.
	appendRaw(t, a.Path(), []byte("garbage\n{\"kind\":\"entry\"}\n"))
	now := time.Now()
	os.Chtimes(a.Path(), now, now.Add(time.Hour))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "broken.jsonl"), []byte("{\"kind\":\"entry\"}\n"), 0o600)

	infos, err := List(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "broken.jsonl") {
		t.Fatalf("List error = %v, want the broken file reported", err)
	}
	got := map[string]Info{}
	for _, in := range infos {
		got[in.Title] = in
	}
	if len(infos) != 2 || infos[0].Title != "alpha" {
		t.Fatalf("infos %+v", infos)
	}
	if in := got["alpha"]; in.ID != a.Header().ID || in.Cwd != "/a" || in.UsageUncertain || in.Path != a.Path() || !in.Created.Equal(a.Header().Created) {
		t.Errorf("alpha: %+v", in)
	}
	if in := got["beta"]; !in.UsageUncertain {
		t.Errorf("beta not flagged usage-uncertain: %+v", in)
	}
}

func TestExportRedacts(t *testing.T) {
	s := newSession(t)
	secrets := []string{
		"sk-proj-abcdefghijklmnop1234567890",
		"ghp_abcdefghijklmnopqrstuvwxyz0123",
		"eyJhbGciOiJIUzI1NiJ9.payload.signature",
		"hunter2hunter2",
		"AKIAABCDEFGHIJKLMNOP",
		"verysecretvalue123",
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "my key is " + secrets[0] + " please use it"})
	asst := sampleAssistant()
	asst.Items[2].Arguments = `{"command":"curl -H 'Authorization: Bearer ` + secrets[2] + `' https://x","env":"GITHUB_TOKEN=` + secrets[1] + `"}`
	if err := s.Append(EntryRecord(asst)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Entry{Type: EntryToolResult, Result: &ToolResult{CallID: "call_1", Tool: "bash", Text: "aws " + secrets[4],
		Details: map[string]any{"api_key": secrets[3], "nested": map[string]any{"client_secret": secrets[5], "tokens_before": 12.0}, "password": []any{"a-long-password"}}}})
	s.Close()
	// A record from a newer writer is exported (redacted) as well.
	appendRaw(t, s.Path(), []byte(`{"kind":"future","Authorization":"Basic dXNlcjpwYXNz"}`+"\n"))

	var out bytes.Buffer
	if err := Export(s.Path(), &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, sec := range append(secrets, "a-long-password", "dXNlcjpwYXNz") {
		if strings.Contains(text, sec) {
			t.Errorf("export leaks %q", sec)
		}
	}
	for _, keep := range []string{"please use it", "gAAAAB", `"tokens_before":12`, "https://x", "Hello, <world>"} {
		if !strings.Contains(text, keep) {
			t.Errorf("export lost %q", keep)
		}
	}
	if n := strings.Count(text, Redacted); n < 8 {
		t.Errorf("only %d redactions:\n%s", n, text)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %d not JSON: %s", lines, sc.Bytes())
		}
	}
	if lines != 5 {
		t.Fatalf("%d lines exported, want 5", lines)
	}
	// The export is itself a readable session with the same shape.
	p := filepath.Join(t.TempDir(), "export.jsonl")
	os.WriteFile(p, []byte(text), 0o600)
	r, err := Inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	orig, _ := Inspect(s.Path())
	defer orig.Close()
	if d := cmp.Diff(branchIDs(orig.Branch()), branchIDs(r.Branch())); d != "" || r.UnknownRecords() != 1 {
		t.Fatalf("exported session differs: %s", d)
	}
}
