package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
)

func newRecorder(t *testing.T, maxBlob int64) *Recorder {
	t.Helper()
	home := t.TempDir()
	st, err := OpenWorkspace(home, "/work/space", maxBlob)
	if err != nil {
		t.Fatal(err)
	}
	return &Recorder{Store: st}
}

func file(s string) *File { return &File{Data: []byte(s), Mode: 0o644} }

func TestStageKinds(t *testing.T) {
	r := newRecorder(t, 0)
	cases := []struct {
		name          string
		before, after *File
		kind          Kind
		diff          []string
	}{
		{"add", nil, file("new\n"), Add, []string{"--- /dev/null", "+++ b/p.txt", "+new"}},
		{"modify", file("a\nb\n"), file("a\nc\n"), Modify, []string{"--- a/p.txt", "+++ b/p.txt", "-b", "+c"}},
		{"delete", file("gone\n"), nil, Delete, []string{"--- a/p.txt", "+++ /dev/null", "-gone"}},
	}
	for _, c := range cases {
		rec, ok, err := r.Stage("p.txt", c.before, c.after)
		if err != nil || !ok {
			t.Fatalf("%s: Stage = %v, %v", c.name, ok, err)
		}
		if rec.Kind != c.kind || rec.Path != "p.txt" || rec.DiffOmitted || rec.Note != "" {
			t.Errorf("%s: record %+v", c.name, rec)
		}
		for _, want := range c.diff {
			if !strings.Contains(rec.Diff, want+"\n") {
				t.Errorf("%s: diff lacks %q:\n%s", c.name, want, rec.Diff)
			}
		}
		if (rec.Before == nil) != (c.before == nil) || (rec.After == nil) != (c.after == nil) {
			t.Errorf("%s: images %+v %+v", c.name, rec.Before, rec.After)
		}
		for _, img := range []*Image{rec.Before, rec.After} {
			if img == nil {
				continue
			}
			if img.Unstored || img.Mode != 0o644 {
				t.Errorf("%s: image %+v", c.name, img)
			}
			if _, err := r.Store.Get(img.SHA256); err != nil {
				t.Errorf("%s: image not kept: %v", c.name, err)
			}
		}
	}
	if _, ok, err := r.Stage("p.txt", file("same"), file("same")); ok || err != nil {
		t.Errorf("identical sides staged a change (%v, %v)", ok, err)
	}
	if _, ok, err := r.Stage("p.txt", nil, nil); ok || err != nil {
		t.Errorf("absent sides staged a change (%v, %v)", ok, err)
	}
}

// TestStageQuotesOddPaths: a path with a newline in it is quoted in the
// diff's headers, so no line of the diff is one the change did not make
// (an editor shows the diff of every change, a run's "Changed" list too).
func TestStageQuotesOddPaths(t *testing.T) {
	r := newRecorder(t, 0)
	rec, ok, err := r.Stage("odd\n+fake", file("a\n"), file("b\n"))
	if err != nil || !ok {
		t.Fatalf("Stage = %v, %v", ok, err)
	}
	for _, line := range strings.Split(rec.Diff, "\n") {
		if line == "+fake" || line == "+fake\"" {
			t.Fatalf("the path made a diff line:\n%s", rec.Diff)
		}
	}
	if !strings.Contains(rec.Diff, `+++ "b/odd\n+fake"`) {
		t.Errorf("header not quoted:\n%s", rec.Diff)
	}
}

// TestSummariesQuoteOddPaths: every summary line that stands for a diff
// — a directory created, removed or changed, a mode-only change, content
// not kept — names an odd path quoted, as the diff headers do, so the
// summary stays one line that says what it is.
func TestSummariesQuoteOddPaths(t *testing.T) {
	r := newRecorder(t, 0)
	const odd = "odd\n+fake"
	dir := &Image{Dir: true, Mode: 0o755}
	mode, _, err := r.Stage(odd, &File{Data: []byte("a\n"), Mode: 0o644}, &File{Data: []byte("a\n"), Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	file := &Image{SHA256: "00", Size: 1, Mode: 0o644}
	for _, d := range []string{
		r.Describe(odd, nil, dir, nil, nil).Diff,
		r.Describe(odd, dir, nil, nil, nil).Diff,
		r.Describe(odd, dir, &Image{Dir: true, Mode: 0o700}, nil, nil).Diff,
		r.Describe(odd, dir, file, nil, nil).Diff,
		r.Describe(odd, file, dir, nil, nil).Diff,
		r.Describe(odd, &Image{Unstored: true, Size: 9}, file, nil, nil).Diff,
		mode.Diff,
	} {
		if strings.Contains(d, "\n") || !strings.Contains(d, `"odd\n+fake"`) {
			t.Errorf("summary %q does not name the path quoted on one line", d)
		}
	}
	if mode.Diff != `mode of "odd\n+fake" changed: 0644 → 0755; content unchanged` {
		t.Errorf("mode-only change: %q", mode.Diff)
	}
}

func TestStageDiffBound(t *testing.T) {
	r := &Recorder{MaxDiffBytes: 1024}
	big := strings.Repeat("line of text\n", 200) // 2600 bytes
	// Growth beyond the bound: the summary without computing a diff.
	rec, _, _ := r.Stage("big.txt", file(""), file(big))
	if !rec.DiffOmitted || !strings.Contains(rec.Diff, "1024-byte bound") || strings.Contains(rec.Diff, "\n") {
		t.Errorf("grown diff = %q (omitted %v)", rec.Diff, rec.DiffOmitted)
	}
	// Same size, every line changed: the diff is computed and over it.
	rec, _, _ = r.Stage("big.txt", file(big), file(strings.ReplaceAll(big, "text", "TEXT")))
	if !rec.DiffOmitted || !strings.Contains(rec.Diff, "+200 -200 lines") {
		t.Errorf("rewritten diff = %q", rec.Diff)
	}
	// Within the bound: whole.
	rec, _, _ = r.Stage("big.txt", file(big), file(strings.Replace(big, "text", "TEXT", 1)))
	if rec.DiffOmitted || !strings.HasPrefix(rec.Diff, "--- a/big.txt\n") {
		t.Errorf("small diff omitted: %q", rec.Diff)
	}
	rec, _, _ = r.Stage("bin", file("a\x00b"), file("a\x00c"))
	if !rec.DiffOmitted || !strings.Contains(rec.Diff, "binary file bin changed") {
		t.Errorf("binary diff = %q", rec.Diff)
	}
}

func TestStoreLimitSaysSo(t *testing.T) {
	r := newRecorder(t, 16)
	rec, ok, err := r.Stage("f", file("small"), file("larger than sixteen bytes"))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if rec.Before.Unstored || !rec.After.Unstored {
		t.Errorf("images %+v %+v", rec.Before, rec.After)
	}
	if !strings.Contains(rec.Note, "new content (25 bytes) is over the change store's 16-byte per-file limit") {
		t.Errorf("note = %q", rec.Note)
	}
	if _, err := r.Store.Get(rec.After.SHA256); !errors.Is(err, ErrNotStored) {
		t.Errorf("Get of a skipped image = %v", err)
	}
	// Only the first prior and the last new image matter: a skipped one
	// in between does not, a skipped first prior image is said.
	next, _, err := r.Stage("f", file("larger than sixteen bytes"), file("tiny"))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Cumulative([]Record{rec, next})
	if len(got) != 1 || got[0].DiffOmitted || !strings.Contains(got[0].Diff, "-small") {
		t.Errorf("cumulative over a skipped middle image = %+v", got)
	}
	later, _, err := r.Stage("f", file("tiny"), file("end"))
	if err != nil {
		t.Fatal(err)
	}
	got = r.Cumulative([]Record{next, later, {Change: Change{Path: "g", Kind: Add, Diff: "d"}}})
	if len(got) != 2 || got[1].Diff != "d" || !got[0].DiffOmitted ||
		!strings.Contains(got[0].Diff, "cumulative diff of f unavailable: an image (25 bytes) was not kept") {
		t.Errorf("cumulative from a skipped image = %+v", got)
	}
}

func TestStorePermissionsAndDamage(t *testing.T) {
	home := t.TempDir()
	st, err := OpenWorkspace(home, "/ws", 0)
	if err != nil {
		t.Fatal(err)
	}
	sum, stored, err := st.Put([]byte("hello"))
	if err != nil || !stored {
		t.Fatal(stored, err)
	}
	// Again: content-addressed, nothing rewritten.
	if again, _, err := st.Put([]byte("hello")); err != nil || again != sum {
		t.Fatal(again, err)
	}
	err = filepath.WalkDir(filepath.Join(home, "store"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWorkspace(home, "/ws", 0); err != nil {
		t.Errorf("reopen: %v", err)
	}
	if err := os.WriteFile(st.blobPath(sum), []byte("HELLO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(sum); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Get of a damaged blob = %v", err)
	}
	if _, err := st.Get("../../etc/passwd"); err == nil {
		t.Error("Get accepted a path")
	}
}

func TestCumulative(t *testing.T) {
	r := newRecorder(t, 0)
	stage := func(p string, before, after *File) Record {
		t.Helper()
		rec, ok, err := r.Stage(p, before, after)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		return rec
	}
	recs := []Record{
		stage("b.go", file("one\ntwo\nthree\n"), file("one\nTWO\nthree\n")),
		stage("a.txt", nil, file("created\n")),
		stage("b.go", file("one\nTWO\nthree\n"), file("one\nTWO\nTHREE\n")),
		stage("a.txt", file("created\n"), file("created\nand edited\n")),
		stage("c.txt", file("x\n"), file("y\n")),
		stage("c.txt", file("y\n"), file("x\n")), // back to where it was
		stage("d.txt", file("keep\n"), file("kept\n")),
		stage("d.txt", file("kept\n"), nil), // then deleted
		stage("e.txt", nil, file("short-lived\n")),
		stage("e.txt", file("short-lived\n"), nil), // created and deleted
	}
	// Through the ledger's JSON, as after a resume.
	raw, err := json.Marshal(map[string]any{DetailsKey: recs})
	if err != nil {
		t.Fatal(err)
	}
	var details map[string]any
	if err := json.Unmarshal(raw, &details); err != nil {
		t.Fatal(err)
	}
	back, err := FromDetails(details)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Cumulative(back)
	if len(got) != 3 || got[0].Path != "a.txt" || got[1].Path != "b.go" || got[2].Path != "d.txt" {
		t.Fatalf("cumulative = %+v", got)
	}
	if got[2].Kind != Delete || got[2].Diff != "--- a/d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep\n" {
		t.Errorf("d.txt = %+v", got[2])
	}
	if got[0].Kind != Add || got[0].Diff != "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+created\n+and edited\n" {
		t.Errorf("a.txt = %+v", got[0])
	}
	if got[1].Kind != Modify || !strings.Contains(got[1].Diff, "-two\n-three\n+TWO\n+THREE\n") {
		t.Errorf("b.go = %+v", got[1])
	}
	// Without the store the images are gone: said, not guessed.
	var bare *Recorder
	got = bare.Cumulative(back)
	if len(got) != 3 || !got[1].DiffOmitted || !strings.Contains(got[1].Diff, "cumulative diff of b.go unavailable") {
		t.Errorf("without store = %+v", got)
	}
}

// TestUnifiedApplies: the diff of the trimmed middle, rendered against
// the whole text, is a correct diff: applied to the old text it gives the
// new one, and it is never longer than udiff's own.
func TestUnifiedApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a\n", "b\n", "c\n", "a", "b", "\n", "ab\n", "x\n"}
	gen := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := range 20000 {
		old, updated := gen(), gen()
		if rng.IntN(2) == 0 { // often a small change of a shared text
			updated = old[:rng.IntN(len(old)+1)] + gen() + old[rng.IntN(len(old)+1):]
		}
		got := unified("a/f", "b/f", old, updated)
		if (got == "") != (old == updated) {
			t.Fatalf("case %d: unified(%q, %q) = %q", i, old, updated, got)
		}
		if got == "" {
			continue
		}
		applied, err := applyUnified(got, old)
		if err != nil || applied != updated {
			t.Fatalf("case %d: unified(%q, %q) =\n%s\napplies to %q, %v", i, old, updated, got, applied, err)
		}
		ref := udiff.Unified("a/f", "b/f", old, updated)
		if applied, err := applyUnified(ref, old); err != nil || applied != updated {
			t.Fatalf("case %d: the reference applier is wrong on udiff's own diff:\n%s\n%q, %v", i, ref, applied, err)
		}
		if countChanged(got) > countChanged(ref) {
			t.Fatalf("case %d: unified(%q, %q) =\n%s\nchanges more lines than\n%s", i, old, updated, got, ref)
		}
	}
}

func countChanged(d string) int {
	a, r := countLines(d)
	return a + r
}

// applyUnified applies a unified diff of one file to old (a small
// reference applier: udiff.ApplyUnified refuses some diffs udiff renders).
func applyUnified(d, old string) (string, error) {
	oldLines := strings.SplitAfter(old, "\n")
	if oldLines[len(oldLines)-1] == "" {
		oldLines = oldLines[:len(oldLines)-1]
	}
	lines := strings.SplitAfter(d, "\n")[2:] // after ---/+++
	var out strings.Builder
	next := 0 // index of the next old line to copy
	last := &out
	var pending string // a line whose newline may be taken back
	flush := func() { last.WriteString(pending); pending = "" }
	for _, l := range lines {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@"):
			var a, b, c, e int
			if n, _ := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &a, &b, &c, &e); n < 1 {
				return "", fmt.Errorf("bad hunk header %q", l)
			}
			start := a - 1
			if strings.HasPrefix(l, "@@ -0,0") || strings.Contains(l, fmt.Sprintf("-%d,0 ", a)) {
				start = a
			}
			flush()
			for ; next < start; next++ {
				out.WriteString(oldLines[next])
			}
		case strings.HasPrefix(l, "\\"):
			pending = strings.TrimSuffix(pending, "\n")
		case l[0] == ' ':
			flush()
			pending = l[1:]
			next++
		case l[0] == '-':
			flush()
			next++
		case l[0] == '+':
			flush()
			pending = l[1:]
		default:
			return "", fmt.Errorf("bad line %q", l)
		}
	}
	flush()
	for ; next < len(oldLines); next++ {
		out.WriteString(oldLines[next])
	}
	return out.String(), nil
}
