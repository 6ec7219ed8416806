//go:build unix

package tools

import (
	"strings"
	"testing"
)

// TestBidiControlsNeutralizedInToolOutput: real bash output holding every
// bidirectional control (U+202A–202E, U+2066–2069, and the marks) and tag
// characters reaches the model and the progress stream only as visible
// ⟨U+XXXX⟩ marks; ordinary non-ASCII text is untouched.
func TestBidiControlsNeutralizedInToolOutput(t *testing.T) {
	b := newBash(t, Config{})
	var progress strings.Builder
	raw := argsJSON(t, map[string]any{"command": `printf 'a\u202ab\u202bc\u202cd\u202de\u202ef\u2066g\u2067h\u2068i\u2069j\u200ek\u200fl\u061cm \U000E0041 héllo\n'`})
	res, err := b.Execute(t.Context(), Invocation{CallID: "c", Arguments: raw, Progress: func(s string) { progress.WriteString(s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := "a⟨U+202A⟩b⟨U+202B⟩c⟨U+202C⟩d⟨U+202D⟩e⟨U+202E⟩f⟨U+2066⟩g⟨U+2067⟩h⟨U+2068⟩i⟨U+2069⟩j⟨U+200E⟩k⟨U+200F⟩l⟨U+061C⟩m ⟨U+E0041⟩ héllo\n"
	if !strings.HasPrefix(res.Text, want) {
		t.Errorf("result %q, want prefix %q", res.Text, want)
	}
	if progress.String() != want {
		t.Errorf("progress %q, want %q", progress.String(), want)
	}
	for _, r := range res.Text + progress.String() {
		if isBidiControl(r) || isTagChar(r) {
			t.Fatalf("%U reached the output", r)
		}
	}
}
