package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzDecodeRecord feeds arbitrary lines to the record parser. It must
// never panic; valid JSON is never classified as a torn (syntax) error;
// and whatever decodes re-encodes to a line that decodes to the same
// record and re-encodes to identical bytes.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []Record{
		EntryRecord(Entry{ID: "e1", Type: EntryUser, Text: "hi"}),
		EntryRecord(sampleAssistant()),
		EntryRecord(Entry{ID: "c1", Parent: "e1", Type: EntryCompaction, Compaction: &Compaction{Summary: "s", FirstKept: "e1", ReadFiles: []string{"a"}, ModifiedFiles: []string{"b"}, TokensBefore: 5}}),
		EntryRecord(Entry{ID: "t1", Type: EntryToolResult, Result: &ToolResult{CallID: "c", Tool: "bash", Text: "out", IsError: true, Details: map[string]any{"exit": 1.0}}}),
		HeadRecord("e1"),
		UsageRecord(Usage{RunID: "r", RequestID: "q", Input: 1, CachedInput: 2, Output: 3, Reasoning: 4, CostPicodollars: -5}),
		UncertainRecord(UsageUncertain{RunID: "r", Operation: "compaction", Reason: "http_5xx", Dispatched: true, Attempt: 3}),
		CheckpointRecord(Checkpoint{RunID: "r", Outcome: OutcomeFailed, Error: "boom"}),
		DelegatedRecord(DelegatedUsage{ChildSession: "c", Usage: Usage{Input: 9}, Uncertain: true}),
		DispatchRecord(Dispatch{ID: "0123456789abcdef", RunID: "r", Operation: "compaction", Model: "m", Attempt: 2}),
		SettledRecord(DispatchSettled{ID: "0123456789abcdef", RunID: "r", Outcome: SettledUncertain}),
		RecoveredRecord(RecoveredOutput{RunID: "r", Channel: "text", Text: "part\n\"ial\"", Attempt: 1}),
	} {
		line, err := appendRecord(nil, r, 0, 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.TrimSuffix(line, []byte("\n")))
	}
	f.Add([]byte(`{"kind":"future","x":[1,{"y":null}]}`))
	f.Add([]byte(`{"kind":"entry","id":"a\u0041\ud83d\ude00","type":"user"}`))
	f.Add([]byte("\x00\x00\x00"))
	f.Add([]byte(`{"kind":"usage","batch_of":2,"batch_index":2,"input":1}`))
	f.Add([]byte(`{"kind":"entry","batch":3,"id":"a","type":"user"}`))
	f.Add([]byte(`{"kind":"entry","batch":2,"id":"0123456789abcdef","parent":"fedcba9876543210","time":"2026-01-01T00:00:00Z","type":"assistant"}`))
	f.Add([]byte(`{"kind":"entry","id":"0123456789abcdef","time":"2026-01-01T00:00:00Z","type":"user","id":"0000000000000000"}`))
	f.Add([]byte(`{"kind":"usage","batch_of":2,"batch_index":2,"request_id":"r","input":1}`))
	f.Add([]byte(`{"kind":"usage","run_id":"a","request_id":"r","operation":"o","model":"m","input":1,"cached_input":2,"output":3,"reasoning":4,"cost_picodollars":5}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var a strAlloc
		// The opening scanner's fast mode never panics; on canonical lines
		// (checked below on the encoder's output) it agrees with the full
		// scan. Other lines it may misread: typing checks every entry's
		// links against the index (checkLinks).
		var fast meta
		scanMeta(line, &fast, false)
		// The shortcut for the encoder's own shapes reads what the
		// general scanner reads.
		if scanMetaFast(line, &fast) {
			var general meta
			if err := scanMetaGeneral(line, &general, false); err != nil || !reflect.DeepEqual(fast, general) {
				t.Fatalf("scanMetaFast %+v, general scan %+v (%v)", fast, general, err)
			}
		}
		checkUsageFast(t, line)
		r, err := decodeRecord(line, &a)
		if err != nil {
			if errors.Is(err, errSyntax) && json.Valid(line) {
				t.Fatalf("valid JSON classified as a syntax error: %v", err)
			}
			return
		}
		if r.validate() != nil {
			return // unknown kind or incomplete: skipped by readers
		}
		enc, err := appendRecord(nil, r, 0, 1)
		if err != nil {
			return // e.g. tool result details that cannot be re-encoded
		}
		if !json.Valid(enc) {
			t.Fatalf("encoder wrote invalid JSON: %q", enc)
		}
		var full meta
		encLine := bytes.TrimSuffix(enc, []byte("\n"))
		if err := scanMeta(encLine, &full, true); err != nil {
			t.Fatalf("full scan of an encoded record: %v", err)
		}
		if err := scanMeta(encLine, &fast, false); err != nil {
			t.Fatalf("fast scan of an encoded record: %v", err)
		}
		if !cmp.Equal(full, fast, cmp.AllowUnexported(meta{}), cmpopts.EquateEmpty()) {
			t.Fatalf("fast scan %+v, full scan %+v of %q", fast, full, enc)
		}
		r2, err := decodeRecord(bytes.TrimSuffix(enc, []byte("\n")), &a)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v\n%q", err, enc)
		}
		enc2, err := appendRecord(nil, r2, 0, 1)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%q\n%q", enc, enc2)
		}
		if r.Kind == KindEntry {
			// The first decode may hold invalid UTF-8 the encoder replaced.
			if d := cmp.Diff(r2, mustDecode(t, enc2, &a), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("round trip differs: %s", d)
			}
		}
	})
}

func mustDecode(t *testing.T, line []byte, a *strAlloc) Record {
	t.Helper()
	r, err := decodeRecord(bytes.TrimSuffix(line, []byte("\n")), a)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkUsageFast checks that the usage shortcut, where it accepts a line,
// decodes it as the general decoder does.
func checkUsageFast(t *testing.T, line []byte) {
	var a strAlloc
	var fast, general Usage
	if !decodeUsageFast(line, &fast, &a) {
		return
	}
	d := decoder{b: line}
	d.obj(func(key []byte) { d.usageField(key, &general, &a) })
	d.end()
	if d.err != nil || fast != general {
		t.Fatalf("decodeUsageFast %+v, general %+v (%v) for %s", fast, general, d.err, line)
	}
}
