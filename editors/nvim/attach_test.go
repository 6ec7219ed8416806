package nvim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// attachWorkspace writes the files the attachment tests attach: a.txt,
// src/main.go, src/my notes.txt, pics/one.png, pics/readme.txt.
func attachWorkspace(t *testing.T, w *world) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
	for _, d := range []string{"src", "pics"} {
		if err := os.Mkdir(filepath.Join(w.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(w.ws, "a.txt"), "the buffer's text\n")
	writeFile(t, filepath.Join(w.ws, "src", "main.go"), "package main // main's text\n")
	writeFile(t, filepath.Join(w.ws, "src", "my notes.txt"), "spaced\n")
	writeFile(t, filepath.Join(w.ws, "pics", "one.png"), png)
	writeFile(t, filepath.Join(w.ws, "pics", "readme.txt"), "not an image\n")
}

// TestAttachmentCompletion drives testdata/attach_test.lua with keys as
// typed: the empty input window shows its keys; "#" pops up the built-in
// completion menu (#buffer naming the last file buffer, #file:, #image:),
// which goes on through the workspace's directories (a name with a
// space, which a #file: path cannot hold, is not offered; #image: offers
// images only); the prompt with a file, an image and #buffer reaches the
// model with all three; :OctetToggle closes and opens the chat.
func TestAttachmentCompletion(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		attachWorkspace(t, w)
		w.prov.Enqueue(providertest.Text("Looked at all three."))
		r := w.run(t, "attach_test.lua")
		j := func(k string) string { b, _ := json.Marshal(r[k]); return string(b) }
		if h := r.str("hint_empty"); !strings.Contains(h, "<C-s> send") || !strings.Contains(h, "<C-f> queue") || !strings.Contains(h, "<C-c> cancel · # attach") {
			t.Errorf("the empty input window's hint: %q", h)
		}
		if r.str("hint_typed") != "" || r.str("hint_sent") == "" {
			t.Errorf("hint with text typed %q (want none), after sending %q (want it back)", r.str("hint_typed"), r.str("hint_sent"))
		}
		if m := j("menu_hash"); !strings.Contains(m, `"#buffer a.txt"`) || !strings.Contains(m, `"#file:"`) || !strings.Contains(m, `"#image:"`) {
			t.Errorf("menu after #: %s", m)
		}
		if m := j("menu_file"); strings.Contains(m, "#buffer") || !strings.Contains(m, "#file:") {
			t.Errorf("menu after #fi: %s", m)
		}
		if m := j("menu_dirs"); !strings.Contains(m, `"#file:src/"`) || strings.Contains(m, "pics") {
			t.Errorf("menu after #file:s: %s", m)
		}
		if m := j("menu_src"); !strings.Contains(m, `"#file:src/main.go"`) || strings.Contains(m, "my notes") {
			t.Errorf("menu after #file:src/m: %s", m)
		}
		if m := j("menu_png"); !strings.Contains(m, `"#image:pics/one.png"`) || strings.Contains(m, "readme") {
			t.Errorf("menu in pics/ (images only): %s", m)
		}
		if got, want := r.str("line"), "explain #file:src/main.go with #image:pics/one.png and #buffer"; got != want {
			t.Errorf("typed line %q, want %q", got, want)
		}
		in := inputText(t, w.prov, 0)
		for _, want := range []string{"main's text", "the buffer's text", "data:image/png;base64,"} {
			if !strings.Contains(in, want) {
				t.Errorf("the model did not get %q: %.2000s", want, in)
			}
		}
		if r["toggled_off"] != true || r["toggled_on"] != true {
			t.Errorf(":OctetToggle closed the chat %v, opened it again %v", r["toggled_off"], r["toggled_on"])
		}
	})
}

// TestAttachmentsNamedInChat: a prompt with #file:, #image: and #buffer
// and an :OctetAsk selection are shown in the chat with the attachments'
// names under them; a restarted Neovim's resumed chat shows the prompts
// and the names, not the attachments' text (which the recorded prompt
// has appended).
func TestAttachmentsNamedInChat(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		attachWorkspace(t, w)
		w.prov.Enqueue(providertest.Text("Looked at all three."), providertest.Text("A line."))
		r := w.run(t, "attach_test.lua", "OCTET_TEST_CASE=named")
		chat := r.str("chat")
		if !strings.Contains(chat, "and #buffer\n\n> Attached: one.png (image/png, 33 B) · a.txt · src/main.go\n") {
			t.Errorf("the chat does not name the prompt's attachments under it:\n%s", chat)
		}
		if !strings.Contains(chat, "and this line?\n\n> Attached: a.txt lines 1-1\n") {
			t.Errorf("the chat does not name the selection under the :OctetAsk prompt:\n%s", chat)
		}
		r = w.run(t, "attach_test.lua", "OCTET_TEST_CASE=resumed")
		rc := r.str("resumed_chat")
		if strings.Contains(rc, "main's text") || strings.Contains(rc, "The user attached this context") || strings.Contains(rc, "the buffer's text") {
			t.Errorf("the resumed chat shows the attachments' text:\n%s", rc)
		}
		if !strings.Contains(rc, "and #buffer\n\n> Attached: a.txt (editor buffer, unsaved changes included) · src/main.go · image (image/png, 33 bytes)\n") ||
			!strings.Contains(rc, "and this line?\n\n> Attached: a.txt lines 1-1") {
			t.Errorf("the resumed chat does not show the prompts and the attachments' names:\n%s", rc)
		}
	})
}

// TestCompletionPlugins: with nvim-cmp or blink.cmp loaded, octet's
// source offers the attachments in the input window (typed as a person
// types) and the built-in menu stays closed. The plugins are not octet's
// dependencies: the test runs a checkout named by OCTET_TEST_NVIM_CMP or
// OCTET_TEST_BLINK_CMP, on Neovim 0.10 and later, and skips without one.
func TestCompletionPlugins(t *testing.T) {
	plugins := map[string]string{"cmp": os.Getenv("OCTET_TEST_NVIM_CMP"), "blink": os.Getenv("OCTET_TEST_BLINK_CMP")}
	if plugins["cmp"] == "" && plugins["blink"] == "" {
		t.Skip("OCTET_TEST_NVIM_CMP and OCTET_TEST_BLINK_CMP unset: no completion plugin to test with")
	}
	eachNvim(t, func(t *testing.T, w *world) {
		if strings.HasPrefix(testbin.NvimName(w.nvim), "v0.7") {
			t.Skip("nvim-cmp and blink.cmp need Neovim 0.10")
		}
		attachWorkspace(t, w)
		for name, dir := range plugins {
			if dir == "" {
				continue
			}
			r := w.run(t, "plugin_complete_test.lua", "OCTET_TEST_CASE="+name, "OCTET_TEST_PLUGIN="+dir)
			for _, k := range []string{"hash0", "hash", "dir", "file"} {
				m, _ := r[k].(map[string]any)
				if m["ok"] != true || m["builtin"] == true {
					t.Errorf("%s, %s: offered %v, built-in menu shown %v", name, k, m["items"], m["builtin"])
				}
			}
			if r["accepted"] != true {
				t.Errorf("%s: the line after accepting is %q", name, r.str("line"))
			}
		}
	})
}
