package tools

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePatchSections(t *testing.T) {
	text := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: docs/new.md",
		"+# New",
		"+",
		"*** Delete File: old.txt",
		"*** Update File: src/a.go",
		"*** Move to: src/b.go",
		"@@ func main() {",
		" \tx := 1",
		"-\ty := 2",
		"+\ty := 3",
		"",
		"@@",
		"@@ -40,3 +40,4 @@",
		"-last",
		"+final",
		"*** End of File",
		"*** End Patch",
	}, "\n")
	files, err := parsePatch(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []patchFile{
		{op: opAdd, path: "docs/new.md", content: "# New\n\n", line: 2},
		{op: opDelete, path: "old.txt", line: 5},
		{op: opUpdate, path: "src/a.go", moveTo: "src/b.go", line: 6, hunks: []patchHunk{
			{context: []string{"func main() {"}, old: []string{"\tx := 1", "\ty := 2"}, new: []string{"\tx := 1", "\ty := 3"}, line: 8},
			// A unified diff's range header names no line: no context.
			{old: []string{"last"}, new: []string{"final"}, eof: true, line: 13},
		}},
	}
	if d := cmp.Diff(want, files, cmp.AllowUnexported(patchFile{}, patchHunk{})); d != "" {
		t.Errorf("parsed patch (-want +got):\n%s", d)
	}
}

func TestParsePatchHeredocAndCRLF(t *testing.T) {
	text := "<<'EOF'\r\n*** Begin Patch\r\n*** Update File: a.txt\r\n-x\r\n+y\r\n*** End Patch\r\nEOF\r\n"
	files, err := parsePatch(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].path != "a.txt" || files[0].hunks[0].old[0] != "x" || files[0].hunks[0].new[0] != "y" {
		t.Errorf("parsed %+v", files)
	}
}

// TestParsePatchErrors: each malformed patch is refused with the line
// and a sentence saying what is expected.
func TestParsePatchErrors(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"no begin", "*** Update File: a\n-x\n*** End Patch", "patch line 1: the first line must be \"*** Begin Patch\""},
		{"no end", "*** Begin Patch\n*** Update File: a\n-x", "patch line 3: the last line must be \"*** End Patch\""},
		{"empty", "*** Begin Patch\n*** End Patch", "changes no file"},
		{"bad header", "*** Begin Patch\n*** Rename File: a\n*** End Patch", "patch line 2: \"*** Rename File: a\" is not a section header"},
		{"no path", "*** Begin Patch\n*** Delete File:   \n*** End Patch", "patch line 2: "},
		{"add without plus", "*** Begin Patch\n*** Add File: a\nhello\n*** End Patch", "patch line 3: every line of an added file starts with \"+\""},
		{"empty update", "*** Begin Patch\n*** Update File: a\n*** End Patch", "patch line 2: the update of a has no hunk"},
		{"bad hunk line", "*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch", "patch line 4: every line of a hunk starts with"},
		{"bad line after body", "*** Begin Patch\n*** Update File: a\n-x\nfoo\n*** End Patch", "patch line 4: every line of a hunk starts with"},
		{"eof without lines", "*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch", "patch line 4: *** End of File ends a hunk with no lines"},
		{"hunk without @@", "*** Begin Patch\n*** Update File: a\n@@\n-x\n\n-y\n*** End Patch", ""},
		{"twice", "*** Begin Patch\n*** Delete File: a\n*** Update File: b\n*** Move to: a\n-x\n*** End Patch", "patch line 3: a is already changed by the section at line 2"},
		{"empty move", "*** Begin Patch\n*** Update File: a\n*** Move to:  \n*** End Patch", "patch line 3: *** Move to: names no path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parsePatch(c.text)
			if c.want == "" {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParsePatchBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for i := range MaxPatchFiles + 1 {
		b.WriteString("*** Delete File: f" + strings.Repeat("x", i) + "\n")
	}
	b.WriteString("*** End Patch")
	if _, err := parsePatch(b.String()); err == nil || !strings.Contains(err.Error(), "more than the 64") {
		t.Errorf("%d files: %v", MaxPatchFiles+1, err)
	}
	if _, err := parsePatch(strings.Repeat("x", maxPatchBytes+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized patch: %v", err)
	}
}

func hunksOf(t *testing.T, body string) []patchHunk {
	t.Helper()
	files, err := parsePatch("*** Begin Patch\n*** Update File: f\n" + body + "\n*** End Patch")
	if err != nil {
		t.Fatal(err)
	}
	return files[0].hunks
}

func TestApplyHunks(t *testing.T) {
	for _, c := range []struct {
		name, content, body, want string
	}{
		{"replace", "a\nb\nc\n", "@@\n a\n-b\n+B\n c", "a\nB\nc\n"},
		{"two hunks in order", "x\n1\nx\n2\n", "@@\n x\n-1\n+one\n@@\n x\n-2\n+two", "x\none\nx\ntwo\n"},
		{"context narrows", "def f():\n    pass\ndef g():\n    pass\n", "@@ def g():\n-    pass\n+    return 1", "def f():\n    pass\ndef g():\n    return 1\n"},
		{"stacked context", "class A:\n  def m():\n    pass\nclass B:\n  def m():\n    pass\n", "@@ class B:\n@@   def m():\n-    pass\n+    return 2", "class A:\n  def m():\n    pass\nclass B:\n  def m():\n    return 2\n"},
		{"add after context", "a\nb\n", "@@ a\n+inserted", "a\ninserted\nb\n"},
		{"append at end", "a\n", "@@\n+z", "a\nz\n"},
		{"end of file", "k\nv\nk\nv\n", "@@\n k\n-v\n+w\n*** End of File", "k\nv\nk\nw\n"},
		{"trailing whitespace", "a  \nb\n", "@@\n-a\n+A", "A\nb\n"},
		{"indentation", "    a\n", "@@\n-a\n+b", "b\n"},
		{"typographic quotes", "say “hi” — now\n", "@@\n-say \"hi\" - now\n+said", "said\n"},
		{"crlf kept", "a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2", "a\r\nB\r\nB2\r\nc\r\n"},
		{"no final newline", "a\nb", "@@\n-b\n+c", "a\nc"},
		{"trailing empty context", "a\nb\n", "@@\n-b\n+c\n ", "a\nc\n"},
		{"empty file", "", "@@\n+first", "first\n"},
		{"delete lines", "a\nb\nc\n", "@@\n a\n-b\n-c", "a\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyHunks("f", c.content, hunksOf(t, c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("result %q, want %q", got, c.want)
			}
		})
	}
}

// TestApplyHunkErrors: a hunk that does not apply names its number, the
// file, the patch line and the lines it looked for.
func TestApplyHunkErrors(t *testing.T) {
	for _, c := range []struct {
		name, content, body string
		want                []string
	}{
		{"missing lines", "a\nb\n", "@@\n a\n-b\n+B\n@@\n-zzz\n+y", []string{"hunk 2 of 2 for f (patch line 7)", "not found after line 2", "    zzz", "read the file again"}},
		{"missing context", "a\n", "@@ func nope()\n-a\n+b", []string{"hunk 1 of 1", "context line \"func nope()\" was not found"}},
		{"out of order", "1\n2\n", "@@\n-2\n+two\n@@\n-1\n+one", []string{"hunk 2 of 2", "after line 2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := applyHunks("f", c.content, hunksOf(t, c.body))
			if err == nil {
				t.Fatal("applied")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPatchPaths(t *testing.T) {
	got := PatchPaths("*** Begin Patch\n*** Add File: a\n+x\n*** Update File: b\n*** Move to: c\n*** End Patch")
	if d := cmp.Diff([]string{"a", "b", "c"}, got); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	if PatchPaths("not a patch") != nil {
		t.Error("paths of a non-patch")
	}
}

// FuzzParsePatch: parsing and applying never panic, an applied patch's
// added lines all appear in the result, and parsing is deterministic.
func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: a\n@@ x\n-y\n+z\n*** End Patch", "x\ny\n")
	f.Add("*** Begin Patch\n*** Add File: a\n+1\n*** Delete File: b\n*** End Patch", "")
	f.Add("<<EOF\n*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-\n+\n*** End of File\n*** End Patch\nEOF", "\r\n")
	f.Fuzz(func(t *testing.T, text, content string) {
		files, err := parsePatch(text)
		files2, err2 := parsePatch(text)
		if (err == nil) != (err2 == nil) || len(files) != len(files2) {
			t.Fatalf("parse is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if _, ok := err.(*PatchError); !ok {
				t.Fatalf("error %T is not a *PatchError", err)
			}
			return
		}
		for _, pf := range files {
			if pf.path == "" || pf.line < 1 {
				t.Fatalf("section %+v", pf)
			}
			if pf.op != opUpdate {
				continue
			}
			got, err := applyHunks(pf.path, content, pf.hunks)
			if err != nil {
				continue
			}
			for _, h := range pf.hunks {
				for _, l := range h.new {
					if !strings.Contains(got, l) {
						t.Fatalf("added line %q missing from %q", l, got)
					}
				}
			}
		}
	})
}
