package nvim

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// noMarkers fails the test when a file named like a marker exists under
// dir: a statusline item of the model's text ran.
func noMarkers(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "pwned") {
			t.Errorf("%s exists: the model's text ran as a statusline expression", path)
		}
		return nil
	})
}

// TestStatuslineShowsToolTextLiterally: the model searches for, then
// reads, text that is a statusline item running a shell command, with an
// escape and a bidirectional override in it, and the configured model's
// name is one too. Tools that need no approval run, so octet's progress
// says "Running search: <pattern>". The statusline component, evaluated
// while they run as an expression whose result is a format (%{%…%}, how
// lualine uses a component) and as the format itself, shows that text as
// it is (controls and invisible characters visible) and runs nothing; so
// does the idle statusline with the model's name.
func TestStatuslineShowsToolTextLiterally(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.home, "config.toml"), `model = "gpt-5.1%{system('touch pwned-model')}"`+"\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("c1", "search", `{"pattern":"%{system('touch pwned-search')}\u001b[1m\u202e"}`)),
			providertest.Reply(providertest.FunctionCall("c2", "read", `{"path":"%{system('touch pwned-read')}.txt"}`)),
			providertest.Text("Nothing found."),
		)
		r := w.run(t, "untrusted_test.lua", "OCTET_TEST_CASE=statusline")
		noMarkers(t, w.tmp)
		seen := strings.Join(strs(r["seen"]), "\n")
		t.Logf("drawn while the tools ran:\n%s\nidle: %q", seen, strs(r["idle"]))
		for _, want := range []string{
			"Running search: %{system('touch pwned-search')}^[[1m⟨U+202E⟩",
			"Running read: %{system('touch pwned-read')}.txt",
		} {
			if strings.Count(seen, want) != 2 {
				t.Errorf("the statusline drawn through %%{%%…%%} and as a format does not show %q both times; drawn:\n%s", want, seen)
			}
		}
		idle := strs(r["idle"])
		if len(idle) != 2 || !strings.Contains(idle[0], "gpt-5.1%{system('touch pwned-model')}") || idle[0] != idle[1] {
			t.Errorf("the idle statusline does not show the model's name as it is: %q", idle)
		}
	})
}

// TestChatTakesNewlinesInNames: a file name with a newline in it (the
// model's) reaches the approval float's title and the chat's "Changed"
// line, where a newline would split the line or fail to draw; the float
// names it quoted on one line (octet's preview), the chat as ^J, and the
// change's diff names it quoted, and the approved write lands.
func TestChatTakesNewlinesInNames(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("c1", "write", `{"path":"odd\nname.txt","content":"x\n"}`)),
			providertest.Text("Written."),
		)
		r := w.run(t, "untrusted_test.lua", "OCTET_TEST_CASE=newline")
		t.Logf("float:\n%s\nchat:\n%s", r.str("float_text"), r.str("chat"))
		if !strings.Contains(r.str("float_text"), `write "odd\nname.txt"`) {
			t.Errorf("the approval float does not name the file on one line:\n%s", r.str("float_text"))
		}
		if c := r.str("chat"); !strings.Contains(c, "**Changed odd^Jname.txt**") || !strings.Contains(c, `+++ "b/odd\nname.txt"`) || !strings.Contains(c, "Written.") {
			t.Errorf("the chat does not show the change on one line:\n%s", c)
		}
		if got := readFile(t, filepath.Join(w.ws, "odd\nname.txt")); got != "x\n" {
			t.Errorf("the approved write wrote %q", got)
		}
	})
}

// TestChatShowsOmittedDiffsOnALine: a write into directories that did not
// exist records each directory created before the file; the chat shows
// such a change — whose diff is a summary line, not a diff — as one line
// after its "Changed" head, not fenced as a diff, and the file's diff as
// a diff.
func TestChatShowsOmittedDiffsOnALine(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("c1", "write", `{"path":"docs/guide/usage.md","content":"# Usage\n"}`)),
			providertest.Text("Written."),
		)
		r := w.run(t, "untrusted_test.lua", "OCTET_TEST_CASE=newline")
		c := r.str("chat")
		for _, want := range []string{
			"**Changed docs** (add): directory docs created (mode 0755)\n",
			"**Changed docs/guide** (add): directory docs/guide created (mode 0755)\n",
			"**Changed docs/guide/usage.md** (add)\n```diff\n--- /dev/null\n",
		} {
			if !strings.Contains(c, want) {
				t.Errorf("the chat lacks %q:\n%s", want, c)
			}
		}
		if strings.Contains(c, "```diff\ndirectory") {
			t.Errorf("a directory's summary is fenced as a diff:\n%s", c)
		}
	})
}

// TestSideBySideFindsTheExactBuffer: the model writes a new file "notes"
// while notes.txt is open. The side-by-side view of the approval shows
// the file before the change as empty, not notes.txt (bufnr() would take
// the path as a pattern that notes.txt matches).
func TestSideBySideFindsTheExactBuffer(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "notes.txt"), "the notes\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("c1", "write", `{"path":"notes","content":"new\n"}`)),
		)
		r := w.run(t, "untrusted_test.lua", "OCTET_TEST_CASE=side_by_side")
		if sbs := strs(r["sbs"]); len(sbs) != 2 || sbs[0] != "" || sbs[1] != "new" {
			t.Errorf("side-by-side windows (before, after): %q", sbs)
		}
	})
}

// strs is a fact that is a list of strings.
func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
