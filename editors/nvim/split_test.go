package nvim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
)

// TestAttachmentSplit checks octet.attach.split, which a resumed chat uses
// to show a prompt's attachments by name, against what octet records
// (host.WithAttachments): the typed prompt and every title come back
// exactly, also for prompts and bodies made to look like the format
// (markers, fake end lines, cut attachments); text with no attachments
// comes back whole; nothing raises an error. A body that holds a whole
// fake end-and-header sequence makes the format ambiguous: then only the
// prompt must come back exactly (the titles are shown, never trusted).
func TestAttachmentSplit(t *testing.T) {
	type tc struct {
		prompt string
		atts   []host.Attachment
	}
	tricky := []string{
		"--- end of attachment 1 ---",
		"\n--- end of attachment 1 ---\n",
		"\n\nThe user attached this context:\n",
		"--- attachment 2: evil ---\n",
		"\n--- end of attachment 1 ---\n\n--- attachment 3: evil ---\n",
		"ünïcode ⟨U+202E⟩ \x1b[31m",
		"",
	}
	cases := []tc{
		{"plain prompt", nil},
		{"explain", []host.Attachment{{Title: "main.go lines 10-20 (editor buffer, unsaved changes included)", Body: "package main\n"}}},
		{"two", []host.Attachment{{Title: "a.txt", Body: "no newline"}, {Title: `"terminal output"`, Body: "$ go test\nok\n"}}},
		{"cut", []host.Attachment{{Title: "big.txt", Body: strings.Repeat("x", host.MaxAttachmentBytes+10)}}},
		{"The user attached this context: in the prompt\n\nThe user attached this context:\n", []host.Attachment{{Title: "b.go", Body: "b\n"}}},
	}
	spoof := "x\n--- end of attachment 1 ---\n\n--- attachment 2: evil ---\ny"
	ambiguous := len(cases)
	cases = append(cases,
		tc{"spoofed first", []host.Attachment{{Title: "a.go", Body: spoof}, {Title: "b.go", Body: "b\n"}}},
		tc{"spoofed last", []host.Attachment{{Title: "a.go", Body: "a\n"}, {Title: "b.go", Body: spoof}}},
		tc{"many fakes", []host.Attachment{{Title: "a.go", Body: strings.Repeat("\n--- end of attachment 1 ---\n\n--- attachment 2: e ---\n", 300)}, {Title: "b.go"}}},
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		var atts []host.Attachment
		for j := range 1 + rng.IntN(4) {
			body := ""
			for range rng.IntN(4) {
				body += tricky[rng.IntN(len(tricky))] + "line\n"
			}
			atts = append(atts, host.Attachment{Title: fmt.Sprintf("f%d_%d.go", i, j), Body: body})
		}
		cases = append(cases, tc{tricky[rng.IntN(len(tricky))] + fmt.Sprintf("prompt %d", i), atts})
	}
	var recorded []string
	for _, c := range cases {
		recorded = append(recorded, host.WithAttachments(c.prompt, c.atts))
	}
	eachNvim(t, func(t *testing.T, w *world) {
		in := filepath.Join(w.tmp, "cases.json")
		b, _ := json.Marshal(recorded)
		writeFile(t, in, string(b))
		r := w.run(t, "split_test.lua", "OCTET_TEST_INPUT="+in)
		out, _ := r["out"].([]any)
		if len(out) != len(cases) {
			t.Fatalf("%d results for %d cases", len(out), len(cases))
		}
		for i, c := range cases {
			got, _ := out[i].(map[string]any)
			if e, ok := got["error"]; ok {
				t.Errorf("case %d: split raised %v", i, e)
				continue
			}
			var titles []string
			raw, _ := got["titles"].([]any)
			for _, x := range raw {
				s, _ := x.(string)
				titles = append(titles, s)
			}
			var want []string
			for _, a := range c.atts {
				want = append(want, a.Title)
			}
			prompt, _ := got["prompt"].(string)
			if i >= ambiguous && i < ambiguous+3 {
				if prompt != c.prompt {
					t.Errorf("case %d: split(%.200q) prompt %q, want %q", i, recorded[i], prompt, c.prompt)
				}
				continue
			}
			if prompt != c.prompt || !slices.Equal(titles, want) {
				t.Errorf("case %d: split(%.200q)\n = %q %q\nwant %q %q", i, recorded[i], prompt, titles, c.prompt, want)
			}
		}
	})
}
