//go:build unix

package session

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// OCTET_SESSION_SPECMIN overrides the size from which opening types
// speculatively, so the whole suite can run through that path:
// OCTET_SESSION_SPECMIN=0 go test ./session
func init() {
	if v := os.Getenv("OCTET_SESSION_SPECMIN"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			panic("OCTET_SESSION_SPECMIN: " + err.Error())
		}
		specMinBytes = n
	}
}

// inspectBoth opens path read-only with and without speculative typing.
func inspectBoth(t *testing.T, path string) (spec, plain *Session, specErr, plainErr error) {
	t.Helper()
	old := specMinBytes
	defer func() { specMinBytes = old }()
	specMinBytes = 0
	spec, specErr = Inspect(path)
	specMinBytes = 1 << 62
	plain, plainErr = Inspect(path)
	for _, s := range []*Session{spec, plain} {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	return spec, plain, specErr, plainErr
}

// TestSpeculativeTyping checks that typing entries while indexing them
// yields the same branch as typing the branch afterwards, and the same
// errors for lines whose body contradicts the indexed id or parent — on
// the branch (refused) and off it (ignored, as without speculation).
func TestSpeculativeTyping(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gen.jsonl")
	want := genLarge(t, path, 30000, 8<<20)
	spec, plain, err1, err2 := inspectBoth(t, path)
	if err1 != nil || err2 != nil {
		t.Fatalf("open: %v / %v", err1, err2)
	}
	if len(spec.Branch()) != want || !reflect.DeepEqual(spec.Branch(), plain.Branch()) {
		t.Fatalf("speculative branch (%d entries) differs from the plain one (%d, want %d)", len(spec.Branch()), len(plain.Branch()), want)
	}
	if spec.Len() != plain.Len() || spec.Totals() != plain.Totals() || spec.Head() != plain.Head() {
		t.Fatalf("speculative open differs: len %d/%d head %s/%s", spec.Len(), plain.Len(), spec.Head(), plain.Head())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	onBranch := map[string]bool{}
	for _, e := range plain.Branch() {
		onBranch[e.ID] = true
	}
	var branchID, offID string
	for line := range strings.Lines(string(data)) {
		id, ok := strings.CutPrefix(line, `{"kind":"entry","id":"`)
		if !ok {
			continue
		}
		id = id[:16]
		if onBranch[id] && branchID == "" && len(onBranch) > 0 && strings.Contains(line, `"parent"`) {
			branchID = id
		}
		if !onBranch[id] {
			offID = id
		}
	}
	if branchID == "" || offID == "" {
		t.Fatal("generated session lacks an entry on or off the branch")
	}
	// rewrite inserts extra before the first top-level "type" member of
	// entry id's line.
	rewrite := func(id, extra string) string {
		var out bytes.Buffer
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, `{"kind":"entry","id":"`+id+`"`) {
				line = strings.Replace(line, `,"type":`, extra+`,"type":`, 1)
			}
			out.WriteString(line)
		}
		p := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, id, extra string
		fail            bool
	}{
		{"branch entry id contradicted", branchID, `,"id":"00000000000000ab"`, true},
		{"branch entry parent contradicted", branchID, `,"parent":"` + offID + `"`, true},
		{"branch entry with non-hex id", branchID, `,"id":"x"`, true},
		{"off-branch entry id contradicted", offID, `,"id":"00000000000000ab"`, false},
		{"off-branch entry undecodable", offID, `,"time":"yesterday"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rewrite(tc.id, tc.extra)
			spec, plain, err1, err2 := inspectBoth(t, p)
			if (err1 != nil) != tc.fail {
				t.Fatalf("speculative open: err %v, want failure %v", err1, tc.fail)
			}
			if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
				t.Fatalf("errors differ:\nspeculative %v\nplain       %v", err1, err2)
			}
			if err1 == nil && !reflect.DeepEqual(spec.Branch(), plain.Branch()) {
				t.Fatal("branches differ")
			}
		})
	}
}

// TestScanMetaFast checks the opening scanner's shortcut against the
// general scan on every line of a generated session and on near misses.
func TestScanMetaFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gen.jsonl")
	genLarge(t, path, 5000, 2<<20)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[1:]
	const id, parent = "0123456789abcdef", "fedcba9876543210"
	lines = append(lines,
		`{"kind":"entry","batch":012,"id":"`+id+`","time":"x"}`,
		`{"kind":"entry","batch":1234567890,"id":"`+id+`","time":"x"}`,
		`{"kind":"entry","batch":-1,"id":"`+id+`","time":"x"}`,
		`{"kind":"entry","id":"`+id+`","parent":"FEDCBA9876543210","time":"x"}`,
		`{"kind":"entry","id":"`+id+`","parent":"`+parent+`","id":"`+parent+`","time":"x"}`,
		`{"kind":"entry","id":"`+id+`", "time":"x"}`,
		`{"kind":"entry","id":"`+id+`","head":"`+parent+`","time":"x"}`,
		`{"kind":"usage","batch_of":2,"run_id":"r"}`,
		`{"kind":"usage","batch_of":2,"batch_index":2,"batch":3,"run_id":"r"}`,
	)
	usage := 0
	for _, line := range append(slices.Clone(lines),
		`{"kind":"usage","input":1,"input":2}`,
		`{"kind":"usage","request_id":"a\\"b","input":1}`,
		`{"kind":"usage","request_id":"a","input":-1}`,
		`{"kind":"usage","request_id":"a","input":1.5}`,
		`{"kind":"usage","request_id":"a","input":1} `,
		`{"kind":"usage","request_id":null,"input":1}`,
		`{"kind":"usage","input":0123}`,
	) {
		if strings.HasPrefix(line, `{"kind":"usage"`) && decodeUsageFast([]byte(line), new(Usage), nil) {
			usage++
		}
		checkUsageFast(t, []byte(line))
	}
	if usage == 0 {
		t.Fatal("usage shortcut never taken")
	}
	fast := 0
	for _, line := range lines {
		var m1, m2 meta
		if !scanMetaFast([]byte(line), &m1) {
			continue
		}
		fast++
		if err := scanMetaGeneral([]byte(line), &m2, false); err != nil || !reflect.DeepEqual(m1, m2) {
			t.Fatalf("line %s:\nfast    %+v\ngeneral %+v (%v)", line, m1, m2, err)
		}
	}
	if fast < len(lines)/2 {
		t.Fatalf("shortcut taken for only %d of %d lines", fast, len(lines))
	}
}

// TestHexID checks the table-driven id parser against strconv.
func TestHexID(t *testing.T) {
	for _, id := range []string{"0123456789abcdef", "ffffffffffffffff", "0000000000000000", NewID(), "0123456789ABCDEF", "0123456789abcde", "0123456789abcdefa", "0123456789abcdeg", "-123456789abcdef", "+123456789abcdef", "0123456789abcde\x80", "0123456789abcde/", "0123456789abcde:", "0123456789abcde`"} {
		want, err := strconv.ParseUint(id, 16, 64)
		wantOK := err == nil && len(id) == 16 && strings.ToLower(id) == id && !strings.ContainsAny(id, "+-")
		got, ok := hexID([]byte(id))
		if ok != wantOK || ok && got != want {
			t.Errorf("hexID(%q) = %x, %v; want %x, %v", id, got, ok, want, wantOK)
		}
	}
}
