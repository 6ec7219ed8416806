//go:build linux

// End-to-end tests of the chat's everyday flows in code-server (see
// e2e_test.go for the stack and its helpers).
package vscode_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestVSCodePreviewTabApprovals approves edits of a file open in a
// preview tab, as one click in the Explorer opens it: the card's View
// diff opens the diff beside it (the preview tab stays, so the document
// stays open and the approved edit lands in its buffer), and the diff
// editor's title offers Approve and Deny, which decide as the card does.
// A failed edit's tool row says why it failed.
func TestVSCodePreviewTabApprovals(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "one\ntwo\nthree\n")
	e.settings(map[string]any{"files.autoSave": "off"}, map[string]any{"octet.path": e.bin})
	edit := func(id, old, neu string) providertest.Turn {
		return providertest.Reply(providertest.FunctionCall(id, "edit", `{"path":"a.txt","old_text":"`+old+`","new_text":"`+neu+`"}`))
	}
	prov := providertest.New(t)
	prov.Enqueue(
		edit("c1", "one", "ONE"), providertest.Text("Approved in the card."),
		edit("c2", "two", "TWO"), providertest.Text("Approved in the diff editor."),
		edit("c3", "three", "THREE"), providertest.Text("Denied in the diff editor."),
		edit("c4", "four", "FOUR"), providertest.Text("That edit failed."),
	)
	url := e.launch(prov)
	type tab struct {
		Label   string
		Preview bool
	}
	var seen struct {
		TabsBefore, TabsWithDiff                        []tab
		LogAfterCard, BufferAfterCard, BufferAfterTitle string
		TitleActions, Settled                           []string
		FailedRow, LogAfterAll                          string
	}
	e.drive("drive-preview.mjs", url, map[string]string{
		"cardPrompt": "Capitalize one", "cardAnswer": "Approved in the card.",
		"titlePrompt": "Capitalize two", "titleAnswer": "Approved in the diff editor.",
		"denyPrompt": "Capitalize three", "denyAnswer": "Denied in the diff editor.",
		"failPrompt": "Capitalize four", "failAnswer": "That edit failed.",
	}, 5*time.Minute, &seen)

	if !slices.ContainsFunc(seen.TabsBefore, func(t tab) bool { return t.Label == "a.txt" && t.Preview }) {
		t.Errorf("tabs before %v: a.txt is not open in a preview tab", seen.TabsBefore)
	}
	if !slices.ContainsFunc(seen.TabsWithDiff, func(t tab) bool { return t.Label == "a.txt" }) {
		t.Errorf("View diff replaced a.txt's preview tab: tabs %v", seen.TabsWithDiff)
	}
	if strings.Contains(seen.LogAfterAll, "file changed after") {
		t.Errorf("an approved edit was refused as changed since shown:\n%s", seen.LogAfterAll)
	}
	if !strings.Contains(seen.BufferAfterCard, "ONE") {
		t.Errorf("a.txt's buffer after approving in the card: %q, want ONE", seen.BufferAfterCard)
	}
	if !slices.ContainsFunc(seen.TitleActions, func(s string) bool { return strings.HasPrefix(s, "Approve") }) ||
		!slices.ContainsFunc(seen.TitleActions, func(s string) bool { return strings.HasPrefix(s, "Deny") }) {
		t.Errorf("the approval's diff editor offers %q, want Approve and Deny", seen.TitleActions)
	}
	if !strings.Contains(seen.BufferAfterTitle, "TWO") || strings.Contains(seen.BufferAfterTitle, "THREE") {
		t.Errorf("a.txt's buffer after approving in the diff editor: %q, want TWO", seen.BufferAfterTitle)
	}
	if !slices.Equal(seen.Settled, []string{"approved", "approved", "denied"}) {
		t.Errorf("approval cards settled %q, want approved, approved, denied", seen.Settled)
	}
	if !strings.Contains(seen.FailedRow, "old_text not found in a.txt") || strings.Contains(seen.FailedRow, `"old_text"`) {
		t.Errorf("the failed edit's row shows %q, want the reason and not the JSON arguments", seen.FailedRow)
	}
	reqs := prov.Requests()
	if len(reqs) != 8 {
		t.Fatalf("provider got %d requests, want 8", len(reqs))
	}
	if raw := string(reqs[5].Raw); !strings.Contains(raw, "Tool call was not approved.") {
		t.Errorf("the request after the denial does not say so: %s", raw)
	}
	if got, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("a.txt on disk = %q: the edits belong to its open buffer", got)
	}
	t.Logf("screenshots in %s", e.shots)
}

// markdownAnswer is an answer with what Markdown in a chat must show: a
// table, a nested list and code in a language.
const markdownAnswer = "Here is what changes:\n\n" +
	"| file | change |\n|---|---|\n| `main.go` | adds **greet** |\n| `main_test.go` | tests it |\n\n" +
	"- Steps\n  - parse the name\n  - print the greeting\n\n" +
	"```go\nfunc greet(name string) string {\n\treturn \"hello, \" + name // greet\n}\n```\n\nThat is all."

// TestVSCodeMarkdown streams an answer with a table, a nested list and a
// Go code block: the table and the nesting are drawn, the code is
// highlighted and is one block on its background (in the dark theme too,
// where each line used to be a chip of its own), Copy puts it on the
// clipboard and Insert at the cursor of the open file. Its screenshots
// (light and dark) are the README's.
func TestVSCodeMarkdown(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "main.go"), "package main\n")
	e.settings(map[string]any{"files.autoSave": "off", "workbench.colorTheme": "Default Light Modern"}, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	prov.Enqueue(providertest.Text(markdownAnswer))
	url := e.launch(prov)
	type drawn struct {
		Theme                 string
		Cells, Nested, Tokens []string
		CodeBoxes             int
		CodeBackground        string
		Buttons               []string
	}
	var seen struct {
		Light, Dark       drawn
		Clipboard, Buffer string
	}
	const codeLine = `return "hello, " + name // greet`
	e.drive("drive-markdown.mjs", url, map[string]string{
		"file": "main.go", "prompt": "Show me the plan", "answerEnd": "That is all.", "codeLine": codeLine,
	}, 4*time.Minute, &seen)

	for _, d := range []drawn{seen.Light, seen.Dark} {
		if !slices.Equal(d.Cells, []string{"file", "change", "main.go", "adds greet", "main_test.go", "tests it"}) {
			t.Errorf("%s: table cells %q", d.Theme, d.Cells)
		}
		if !slices.Equal(d.Nested, []string{"parse the name", "print the greeting"}) {
			t.Errorf("%s: nested list items %q", d.Theme, d.Nested)
		}
		if !slices.Contains(d.Tokens, "hljs-keyword:func") || !slices.Contains(d.Tokens, `hljs-string:"hello, "`) || !slices.Contains(d.Tokens, "hljs-comment:// greet") {
			t.Errorf("%s: highlighted tokens %q", d.Theme, d.Tokens)
		}
		if d.CodeBoxes != 1 || d.CodeBackground != "none" {
			t.Errorf("%s: the code block's code is %d boxes with background %s, want one box on the block's background", d.Theme, d.CodeBoxes, d.CodeBackground)
		}
		if !slices.Equal(d.Buttons, []string{"Copy", "Insert"}) {
			t.Errorf("%s: code block buttons %q", d.Theme, d.Buttons)
		}
	}
	if !strings.Contains(seen.Light.Theme, "vscode-light") || !strings.Contains(seen.Dark.Theme, "vscode-dark") {
		t.Errorf("themes %q and %q, want light then dark", seen.Light.Theme, seen.Dark.Theme)
	}
	if want := "func greet(name string) string {\n\t" + codeLine + "\n}"; seen.Clipboard != want {
		t.Errorf("Copy put %q on the clipboard, want %q", seen.Clipboard, want)
	}
	if !strings.Contains(seen.Buffer, codeLine) {
		t.Errorf("main.go's buffer after Insert: %q", seen.Buffer)
	}
	t.Logf("screenshots in %s", e.shots)
}

// TestVSCodeComposer checks what the composer offers: an empty chat's
// welcome, a side bar where the Sessions pane leaves the chat most of the
// height, Ctrl+Alt+O back to the chat, Ctrl+Alt+K adding the editor's
// selection, @-mentions of a file and of a symbol (its whole declaration)
// completed in the prompt, chips for all three that go with the prompt as
// context, the effort and mode pickers (for the new session, before its
// first prompt) and the model and effort pickers (for the session), and a
// reloaded chat showing the prompt with chips instead of the attached
// text.
func TestVSCodeComposer(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "src", "greet.ts"),
		"export function greetAll(names: string[]): string {\n  return names.map((n) => `hello, ${n}`).join(\"\\n\");\n}\n\nexport const version = 1;\nexport const owner = \"octet\";\n")
	writeFile(t, filepath.Join(e.ws, "notes.md"), "# Notes\nrelease on friday\n")
	e.settings(nil, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	prov.Enqueue(providertest.Text("I see three attachments."), providertest.Text("Now with another model."))
	url := e.launch(prov)
	type pane struct {
		Title  string
		Height float64
	}
	var seen struct {
		Welcome, PromptText, Status, ReloadedUser       string
		Panes                                           []pane
		FocusedByKey                                    bool
		FileRows, SymbolRows                            []string
		Chips, ChipsAfterSend, UserChips, ReloadedChips []string
		Pickers                                         struct{ Model, Effort, Mode string }
		ReloadedPickers                                 struct{ Model, Effort string }
	}
	e.drive("drive-composer.mjs", url, map[string]string{
		"file": "greet.ts", "fileMention": "Compare @note", "fileLabel": "notes.md",
		"symbolMention": "with @greetA", "symbolLabel": "greetAll()",
		"effort": "high", "mode": "controlled", "modeLabel": "Auto-read", "answer": "I see three attachments.",
		"model": "gpt-5.2", "effort2": "low", "prompt2": "Again", "answer2": "Now with another model.",
	}, 5*time.Minute, &seen)

	for _, w := range []string{"Ask octet", "@", "Ctrl+Alt+K", "Ctrl+Alt+O"} {
		if !strings.Contains(seen.Welcome, w) {
			t.Errorf("the empty chat's welcome lacks %q:\n%s", w, seen.Welcome)
		}
	}
	var chat, sessions float64
	for _, p := range seen.Panes {
		switch {
		case strings.HasPrefix(p.Title, "Chat"):
			chat = p.Height
		case strings.HasPrefix(p.Title, "Sessions"):
			sessions = p.Height
		}
	}
	if chat == 0 || sessions == 0 || sessions*3 > chat {
		t.Errorf("side bar panes %+v: the Sessions pane should leave the chat at least three quarters", seen.Panes)
	}
	if !seen.FocusedByKey {
		t.Errorf("Ctrl+Alt+O did not bring the focus to the chat's prompt")
	}
	if !slices.ContainsFunc(seen.FileRows, func(r string) bool { return strings.Contains(r, "notes.md") }) ||
		!slices.ContainsFunc(seen.SymbolRows, func(r string) bool { return strings.Contains(r, "greetAll") && strings.Contains(r, "src/greet.ts:1") }) {
		t.Errorf("@-mention completions: files %q, symbols %q", seen.FileRows, seen.SymbolRows)
	}
	wantChips := []string{"src/greet.ts:5-6", "notes.md", "greetAll() · src/greet.ts:1-3"}
	chipsAre := func(got []string) bool {
		return len(got) == len(wantChips) && !slices.ContainsFunc(wantChips, func(w string) bool {
			return !slices.ContainsFunc(got, func(g string) bool { return strings.HasSuffix(g, w) })
		})
	}
	if !chipsAre(seen.Chips) || !chipsAre(seen.UserChips) || len(seen.ChipsAfterSend) != 0 {
		t.Errorf("chips %q, on the prompt %q, left after sending %q; want %q", seen.Chips, seen.UserChips, seen.ChipsAfterSend, wantChips)
	}
	if !strings.Contains(seen.PromptText, "Compare @notes.md with @greetAll() ") {
		t.Errorf("the prompt reads %q after the mentions", seen.PromptText)
	}
	if !strings.Contains(seen.Status, "Auto-read") {
		t.Errorf("status bar %q after picking Auto-read", seen.Status)
	}
	reqs := prov.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	first, second := string(reqs[0].Raw), string(reqs[1].Raw)
	for _, w := range []string{
		`"effort":"high"`, `"model":"gpt-5.1-codex"`,
		"--- attachment 1: src/greet.ts lines 5-6", "export const version = 1;",
		"--- attachment 2: notes.md", "release on friday",
		"--- attachment 3: src/greet.ts lines 1-3", "export function greetAll",
	} {
		if !strings.Contains(first, w) {
			t.Errorf("the first request lacks %s", w)
		}
	}
	if !strings.Contains(second, `"effort":"low"`) || !strings.Contains(second, `"model":"gpt-5.2"`) {
		t.Errorf("the second request is not with gpt-5.2 at low effort: %s", second[:min(len(second), 400)])
	}
	if seen.Pickers.Model != "gpt-5.2" || seen.Pickers.Effort != "low" || seen.Pickers.Mode != "controlled" {
		t.Errorf("pickers show %+v", seen.Pickers)
	}
	if seen.ReloadedPickers.Model != "gpt-5.2" || seen.ReloadedPickers.Effort != "low" {
		t.Errorf("after a reload the pickers show %+v, want the session's gpt-5.2 at low effort", seen.ReloadedPickers)
	}
	// octet keeps a symbol's lines, not its name.
	if strings.Contains(seen.ReloadedUser, "attached this context") || !slices.Equal(seen.ReloadedChips, []string{"src/greet.ts:5-6", "notes.md", "src/greet.ts:1-3"}) {
		t.Errorf("the reloaded prompt shows %q with chips %q", seen.ReloadedUser, seen.ReloadedChips)
	}
	t.Logf("screenshots in %s", e.shots)
}

// TestVSCodeRetries sends a prompt to a provider that keeps answering
// 503: the chat shows octet's retries as they happen, in one row updated
// in place with the attempt, the wait and the cause ("retrying 2/29 in 2
// s: …503…"), and the row's Cancel ends the run. (The extension used to
// show only "running" in the status bar until octet gave up, minutes
// later.)
func TestVSCodeRetries(t *testing.T) {
	e := newE2E(t)
	e.settings(nil, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	for range 10 {
		prov.Enqueue(providertest.Status(503, "server_error", "overloaded", "the service is overloaded"))
	}
	url := e.launch(prov)
	var seen struct {
		First, Second, AfterCancel, Log string
		Rows                            int
		FirstRetryAfterMs               int
	}
	e.drive("drive-retry.mjs", url, map[string]string{"prompt": "Hello?"}, 4*time.Minute, &seen)
	retrying := regexp.MustCompile(`^⟳ retrying (\d+)/\d+ in \d+ (s|min): .*503.* Cancel$`)
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if !retrying.MatchString(words(seen.First)) || !retrying.MatchString(words(seen.Second)) || words(seen.First) == words(seen.Second) {
		t.Errorf("retry row %q, then %q; want %s, updated", seen.First, seen.Second, retrying)
	}
	if seen.Rows != 1 {
		t.Errorf("%d retry rows, want one updated in place", seen.Rows)
	}
	if !strings.Contains(seen.AfterCancel, "retried") || strings.Contains(seen.AfterCancel, "Cancel") {
		t.Errorf("after Cancel the row reads %q", seen.AfterCancel)
	}
	t.Logf("first retry shown after %d ms; screenshots in %s", seen.FirstRetryAfterMs, e.shots)
}

// TestVSCodeResumeAndRewind runs four prompts — an approved edit, a
// denied command, a run the provider fails, a run cancelled — and reloads
// the window: the resumed chat shows the denial as denied (with octet's
// words) and keeps the failed and cancelled runs' markers. octet: Rewind
// then offers every prompt, the first included, dated in words, and
// rewinding to before the first takes its edit back.
func TestVSCodeResumeAndRewind(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "hello\n")
	e.settings(nil, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("c1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"hello, world"}`)),
		providertest.Text("Edited."),
		providertest.Reply(providertest.FunctionCall("c2", "bash", `{"command":"rm -rf build"}`)),
		providertest.Text("I will not remove it."),
		providertest.Status(400, "invalid_request_error", "bad_request", "the request is malformed"),
		providertest.Stall(),
	)
	url := e.launch(prov)
	type row struct{ Label, Description string }
	var seen struct {
		Live, Resumed, RewindDialog, AfterRewind string
		ResumedTools                             []string
		RewindRows                               []row
	}
	e.drive("drive-resume.mjs", url, map[string]string{
		"editPrompt": "First, greet the world", "editAnswer": "Edited.",
		"denyPrompt": "Second, clean the build", "denyAnswer": "I will not remove it.",
		"failPrompt": "Third, fail", "cancelPrompt": "Fourth, take your time",
	}, 5*time.Minute, &seen)

	if !slices.ContainsFunc(seen.ResumedTools, func(s string) bool {
		return strings.Contains(s, "bash") && strings.Contains(s, "denied") && strings.Contains(s, "Tool call was not approved.")
	}) {
		t.Errorf("the resumed chat's tool rows %q: the denied command is not shown as denied", seen.ResumedTools)
	}
	for _, w := range []string{"Run failed", "the request is malformed", "Run cancelled"} {
		if !strings.Contains(seen.Live, w) {
			t.Errorf("the live chat lacks %q:\n%s", w, seen.Live)
		}
		if !strings.Contains(seen.Resumed, w) {
			t.Errorf("the resumed chat lacks %q:\n%s", w, seen.Resumed)
		}
	}
	var labels []string
	iso := regexp.MustCompile(`\d{4}-\d\d-\d\dT`)
	for _, r := range seen.RewindRows {
		labels = append(labels, r.Label)
		if iso.MatchString(r.Description) || r.Description == "" {
			t.Errorf("rewind offers %q dated %q, want a date in words", r.Label, r.Description)
		}
	}
	if !slices.Equal(labels, []string{"Fourth, take your time", "Third, fail", "Second, clean the build", "First, greet the world"}) {
		t.Errorf("rewind offers %q, want every prompt, newest first", labels)
	}
	if got, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(got) != "hello\n" {
		t.Errorf("a.txt = %q after rewinding to before the first prompt", got)
	}
	if strings.Contains(seen.AfterRewind, "First, greet the world") {
		t.Errorf("the chat after rewinding to before the first prompt still shows it:\n%s", seen.AfterRewind)
	}
	t.Logf("screenshots in %s", e.shots)
}

// TestVSCodeSaveDocuments: octet's edits of open files stay in their
// buffers, and a command reads the disk. Before the command, the file
// only octet changed is saved without asking (the command reads octet's
// text); the file the user also changed is saved only if the user says so
// — here they decline, and the command's approval says the file on disk
// is not the editor's text. (The extension used to let the command read
// the old files, saying nothing.)
func TestVSCodeSaveDocuments(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "a.txt"), "one\n")
	writeFile(t, filepath.Join(e.ws, "c.txt"), "quiet\n")
	e.settings(map[string]any{"files.autoSave": "off", "workbench.editor.enablePreview": false}, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("e1", "edit", `{"path":"a.txt","old_text":"one","new_text":"ONE"}`)),
		providertest.Text("Edited a.txt."),
		providertest.Reply(providertest.FunctionCall("b1", "bash", `{"command":"cat a.txt"}`)),
		providertest.Text("Read a.txt."),
		providertest.Reply(providertest.FunctionCall("e2", "edit", `{"path":"c.txt","old_text":"quiet","new_text":"LOUD"}`)),
		providertest.Text("Edited c.txt."),
		providertest.Reply(providertest.FunctionCall("b2", "bash", `{"command":"cat c.txt"}`)),
		providertest.Text("Read c.txt."),
	)
	url := e.launch(prov)
	var seen struct {
		FirstCard, SecondCard, Question         string
		DirtyBefore, DirtyAfterSave, DirtyAtEnd []string
	}
	e.drive("drive-save.mjs", url, map[string]string{
		"first": "a.txt", "second": "c.txt", "userText": " and mine",
		"editFirst": "Capitalize a.txt", "editFirstAnswer": "Edited a.txt.", "readFirst": "Show a.txt", "readFirstAnswer": "Read a.txt.",
		"editSecond": "Shout in c.txt", "editSecondAnswer": "Edited c.txt.", "readSecond": "Show c.txt", "readSecondAnswer": "Read c.txt.",
	}, 5*time.Minute, &seen)

	if got, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(got) != "ONE\n" {
		t.Errorf("a.txt on disk = %q: octet's edit was not saved before the command", got)
	}
	if !slices.ContainsFunc(seen.DirtyBefore, func(s string) bool { return strings.HasPrefix(s, "a.txt") }) ||
		slices.ContainsFunc(seen.DirtyAfterSave, func(s string) bool { return strings.HasPrefix(s, "a.txt") }) {
		t.Errorf("unsaved tabs after octet's edit %q, when the command asks %q: a.txt should be saved before the command", seen.DirtyBefore, seen.DirtyAfterSave)
	}
	if strings.Contains(seen.FirstCard, "Not saved in the editor") {
		t.Errorf("the first command's approval says a file is unsaved:\n%s", seen.FirstCard)
	}
	reqs := prov.Requests()
	if len(reqs) != 8 {
		t.Fatalf("%d requests, want 8", len(reqs))
	}
	if !strings.Contains(string(reqs[3].Raw), "ONE") {
		t.Errorf("cat a.txt did not read octet's edit: %s", reqs[3].Raw)
	}
	if !strings.Contains(seen.Question, "c.txt") || !strings.Contains(seen.Question, "changes of yours") {
		t.Errorf("the question before the second command: %q", seen.Question)
	}
	if !strings.Contains(seen.SecondCard, "Not saved in the editor") || !strings.Contains(seen.SecondCard, "c.txt") {
		t.Errorf("the second command's approval does not say c.txt is unsaved:\n%s", seen.SecondCard)
	}
	if got, _ := os.ReadFile(filepath.Join(e.ws, "c.txt")); string(got) != "quiet\n" {
		t.Errorf("c.txt on disk = %q: the user declined to save it", got)
	}
	if !slices.ContainsFunc(seen.DirtyAtEnd, func(s string) bool { return strings.HasPrefix(s, "c.txt") }) {
		t.Errorf("unsaved tabs at the end %q: c.txt should still be unsaved", seen.DirtyAtEnd)
	}
	t.Logf("screenshots in %s", e.shots)
}

// TestVSCodeDiagnostics opens a TypeScript file with a type error (VS
// Code's TypeScript server reports it); the model asks octet's
// diagnostics tool, which lists the error as the extension forwarded it,
// fixes it with an approved edit, and the edit's result says the error
// went away once the editor's diagnostics caught up. Its screenshot is
// the README's diagnostics-driven fix.
func TestVSCodeDiagnostics(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.ws, "src", "total.ts"), "export const total: number = \"3\";\n")
	e.settings(map[string]any{"files.autoSave": "off"}, map[string]any{"octet.path": e.bin})
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("d1", "diagnostics", `{}`)),
		providertest.Reply(providertest.FunctionCall("e1", "edit", `{"path":"src/total.ts","old_text":"= \"3\"","new_text":"= 3"}`)),
		providertest.Text("Fixed: `total` is a number now, and the editor reports no problem."),
	)
	url := e.launch(prov)
	var seen struct{ ProblemsBefore, ProblemsAfter, Log string }
	e.drive("drive-diagnostics.mjs", url, map[string]string{
		"file": "total.ts", "prompt": "Fix the problems the editor shows", "answer": "the editor reports no problem",
	}, 5*time.Minute, &seen)

	reqs := prov.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Raw), `"name":"diagnostics"`) {
		t.Errorf("the diagnostics tool is not offered to a client that sends diagnostics")
	}
	if !strings.Contains(string(reqs[1].Raw), "src/total.ts:1:14: error: Type 'string' is not assignable to type 'number'. [ts 2322]") {
		raw := string(reqs[1].Raw)
		t.Errorf("the diagnostics tool's result lacks the editor's error: %s", raw[max(0, strings.Index(raw, `"function_call_output"`)-200):])
	}
	if !strings.Contains(string(reqs[2].Raw), "went away") {
		raw := string(reqs[2].Raw)
		t.Errorf("the edit's result does not say the error went away: %s", raw[max(0, strings.LastIndex(raw, `"function_call_output"`)-200):])
	}
	if got, _ := os.ReadFile(filepath.Join(e.ws, "src", "total.ts")); string(got) != "export const total: number = \"3\";\n" {
		t.Errorf("src/total.ts on disk = %q: the fix belongs to the open buffer", got)
	}
	t.Logf("problems before %q, after %q; screenshots in %s", seen.ProblemsBefore, seen.ProblemsAfter, e.shots)
}
