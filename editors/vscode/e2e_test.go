//go:build linux

// The end-to-end test runs the octet VS Code extension in a real VS Code:
// code-server (VS Code 1.139 served to a browser) driven by headless
// Chromium, with the real octet binary and a scripted provider on
// loopback. .ci/run installs code-server (.ci/setup-code-server.sh); the
// test skips when it is missing, unless OCTET_CODE_SERVER names it.
package vscode_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// stack is what the test needs installed.
type stack struct {
	codeServerDir, codeServer, node24, chromium, npmNode string
}

// findStack returns the installed code-server stack or skips the test
// (fails, in CI: when OCTET_CODE_SERVER is set, everything must be there).
func findStack(t *testing.T) stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts code-server and Chromium")
	}
	dir, required := os.LookupEnv("OCTET_CODE_SERVER")
	if !required {
		dir = "/opt/octet-code-server"
	}
	missing := func(what string) {
		msg := fmt.Sprintf("%s; install it with DIR=%s sh .ci/setup-code-server.sh (about 10 minutes), then npm ci in editors/vscode", what, dir)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := stack{
		codeServerDir: dir,
		codeServer:    filepath.Join(dir, "app", "node_modules", ".bin", "code-server"),
		node24:        filepath.Join(dir, "node24", "node_modules", "node", "bin"),
		chromium:      os.Getenv("OCTET_CHROMIUM"),
	}
	if s.chromium == "" {
		s.chromium = "/usr/bin/chromium"
	}
	for _, p := range []string{s.codeServer, filepath.Join(s.node24, "node"), filepath.Join(dir, "app", "node_modules", "puppeteer-core")} {
		if _, err := os.Stat(p); err != nil {
			missing("code-server is not installed (" + p + " missing)")
		}
	}
	if _, err := os.Stat(s.chromium); err != nil {
		missing("chromium is not installed at " + s.chromium)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@vscode", "vsce")); err != nil {
		missing("the extension's npm packages are not installed (editors/vscode/node_modules)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	s.npmNode = node
	return s
}

// run runs a command, failing the test with its output on error.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// vsix is the extension compiled and packaged once for every test of
// the run (tsc and vsce take 10–20 s each time on a loaded machine; the
// tests ran close to go test's 10-minute limit).
var vsix struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if vsix.dir != "" {
		os.RemoveAll(vsix.dir)
	}
	os.Exit(code)
}

// packageVSIX returns the extension compiled and packaged into a .vsix.
func packageVSIX(t *testing.T, s stack) string {
	t.Helper()
	vsix.once.Do(func() {
		if vsix.dir, vsix.err = os.MkdirTemp("", "octet-vsix-"); vsix.err != nil {
			return
		}
		p := filepath.Join(vsix.dir, "octet.vsix")
		for _, args := range [][]string{
			{"node_modules/typescript/bin/tsc", "-p", "."},
			{"node_modules/@vscode/vsce/vsce", "package", "--allow-missing-repository", "--skip-license", "-o", p},
		} {
			cmd := exec.Command(s.npmNode, args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				vsix.err = fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		vsix.path = p
	})
	if vsix.err != nil {
		t.Fatal(vsix.err)
	}
	return vsix.path
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCodeServer starts code-server on a free loopback port and returns
// its URL; it is stopped (with its extension host and octet) at the end.
func startCodeServer(t *testing.T, s stack, env []string, userDir, extDir, ws string) string {
	t.Helper()
	port := freePort(t)
	log, err := os.Create(filepath.Join(filepath.Dir(userDir), "code-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.codeServer, "--auth", "none", "--bind-addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--disable-telemetry", "--disable-update-check", "--user-data-dir", userDir, "--extensions-dir", extDir, ws)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting code-server: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		log.Close()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return url
		}
	}
	t.Fatalf("code-server did not listen on %s", url)
	return ""
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// e2e is one end-to-end run's directories, its octet binary and, once
// launched, code-server's environment.
type e2e struct {
	t                                     *testing.T
	s                                     stack
	tmp, ws, home, userDir, extDir, shots string
	bin                                   string
	env                                   []string
}

// newE2E makes the directories of a run (screenshots in $OCTET_E2E_SHOTS
// when set) and builds octet.
func newE2E(t *testing.T) *e2e {
	e := &e2e{t: t, s: findStack(t), tmp: t.TempDir(), shots: os.Getenv("OCTET_E2E_SHOTS")}
	e.ws, e.home = filepath.Join(e.tmp, "ws"), filepath.Join(e.tmp, "home")
	e.userDir, e.extDir = filepath.Join(e.tmp, "user"), filepath.Join(e.tmp, "ext")
	if e.shots == "" {
		e.shots = filepath.Join(e.tmp, "shots")
	}
	for _, d := range []string{e.ws, e.home, e.extDir, e.shots} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.bin = filepath.Join(e.tmp, "octet")
	run(t, ".", os.Environ(), "go", "build", "-o", e.bin, "github.com/octet-agent/octet/cmd/octet")
	return e
}

// launch installs the packaged extension into code-server and starts it
// on the workspace, octet talking to prov; it returns the URL.
func (e *e2e) launch(prov *providertest.Server) string {
	return e.launchAt(prov.URL())
}

// launchAt is launch with octet's provider at baseURL.
func (e *e2e) launchAt(baseURL string) string {
	e.env = append(os.Environ(),
		"PATH="+e.s.node24+string(os.PathListSeparator)+os.Getenv("PATH"),
		"OCTET_HOME="+e.home, "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY=test-not-a-key",
		"XDG_CONFIG_HOME="+e.tmp, "XDG_DATA_HOME="+e.tmp, "XDG_CACHE_HOME="+e.tmp, "HOME="+e.tmp,
	)
	run(e.t, e.tmp, e.env, e.s.codeServer, "--user-data-dir", e.userDir, "--extensions-dir", e.extDir, "--install-extension", packageVSIX(e.t, e.s))
	return startCodeServer(e.t, e.s, e.env, e.userDir, e.extDir, e.ws)
}

// settings writes code-server's user settings (a quiet workbench, plus
// user) and the remote's Machine settings (machine: octet's
// machine-scoped settings, which a workspace cannot set).
func (e *e2e) settings(user, machine map[string]any) {
	u := map[string]any{
		"security.workspace.trust.enabled":             false,
		"workbench.startupEditor":                      "none",
		"workbench.tips.enabled":                       false,
		"workbench.secondarySideBar.defaultVisibility": "hidden",
		"chat.disableAIFeatures":                       true,
		"telemetry.telemetryLevel":                     "off",
		"extensions.autoCheckUpdates":                  false,
	}
	maps.Copy(u, user)
	b, _ := json.Marshal(u)
	writeFile(e.t, filepath.Join(e.userDir, "User", "settings.json"), string(b))
	b, _ = json.Marshal(machine)
	writeFile(e.t, filepath.Join(e.userDir, "Machine", "settings.json"), string(b))
}

// drive runs the puppeteer script e2e/<script> against url with cfg (plus
// the stack's and the run's own keys), bounded by d, and decodes what it
// saw into seen; a script that failed (its "failed" key) fails the test
// with its screenshots and the logs.
func (e *e2e) drive(script, url string, cfg map[string]string, d time.Duration, seen any) {
	e.t.Helper()
	cfg["codeServerDir"], cfg["chromium"], cfg["url"], cfg["workspace"], cfg["shots"] = e.s.codeServerDir, e.s.chromium, url, e.ws, e.shots
	data, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(e.tmp, "drive.json")
	writeFile(e.t, cfgPath, string(data))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.node24, "node"), filepath.Join("e2e", script), cfgPath)
	cmd.Env = e.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var failed struct{ Failed string }
	jerr := json.Unmarshal(out, &failed)
	if jerr == nil {
		jerr = json.Unmarshal(out, seen)
	}
	if err != nil || jerr != nil || failed.Failed != "" {
		logs, _ := os.ReadFile(filepath.Join(e.tmp, "code-server.log"))
		e.t.Fatalf("driver: %v %v\n%s\nstderr: %s\nscreenshots in %s\ncode-server log:\n%s\noctet output channel:\n%s",
			err, jerr, out, stderr.String(), e.shots, tail(logs), extensionLog(e.userDir))
	}
}

// TestVSCodeChatApprovals installs the .vsix into code-server, opens a
// workspace, sends a prompt through the chat view, reviews the approval
// from its notification (which offers nothing else), opens its diff from
// the chat's card and approves it there (the file changes on disk),
// checks the session is listed, approves a multi-line command from its
// card after its notification showed it on one line with no link and no
// decision, denies an edit with a reason (the model is told it; the file
// stays), reloads the window (the last session comes back in the chat),
// and approves in the chat an edit of a file open in the editor (it lands
// in the unsaved buffer; undo reverts it).
func TestVSCodeChatApprovals(t *testing.T) {
	e := newE2E(t)
	ws := e.ws
	writeFile(t, filepath.Join(ws, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "bye\n")
	writeFile(t, filepath.Join(ws, "c.txt"), "quiet\n")

	bin := e.bin
	e.settings(map[string]any{
		"octet.path": bin,
		// VS Code for the Web saves after a delay by default; the test
		// checks that octet's edit of an open file stays in its buffer.
		"files.autoSave": "off",
	}, map[string]any{"octet.path": bin}) // machine-scoped: a workspace cannot choose the binary

	// A command whose first line is harmless and whose notification, before,
	// showed only that line (as a link to a command) with Approve buttons.
	const bashCommand = "echo \"see [the docs](command:workbench.action.showCommands)\"\necho pwned > pwned.txt"
	bashArgs, _ := json.Marshal(map[string]string{"command": bashCommand})
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.Reasoning("enc", "The user wants a greeting: edit a.txt."), providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"hello, world"}`)),
		providertest.Text("I changed `a.txt` as asked:\n\n- `hello` is now **hello, world**"),
		providertest.Reply(providertest.FunctionCall("call_b", "bash", string(bashArgs))),
		providertest.Text("The tests ran."),
		providertest.Reply(providertest.FunctionCall("call_2", "edit", `{"path":"b.txt","old_text":"bye","new_text":"farewell"}`)),
		providertest.Text("Understood: b.txt stays as it was."),
		providertest.Reply(providertest.FunctionCall("call_3", "edit", `{"path":"c.txt","old_text":"quiet","new_text":"LOUD"}`)),
		providertest.Text("c.txt is loud now."),
	)
	url := e.launch(prov)

	type toast struct {
		Message        string
		Buttons, Links []string
	}
	var seen struct {
		EditNotification, BashNotification    toast
		BashCard, StatusWhileWaiting          string
		TitleIcons                            int
		Failed, ApprovalNotification, DiffTab string
		RunDiffTab                            string
		ChatAfterApprove, ChatAfterDeny       string
		StaleReview                           string
		StatusBefore, StatusAfter             string
		SessionListed, Restored               bool
		ReasoningCollapsed, DiffClosed        bool
		FileLinks                             []string
		BufferAfterEdit, BufferAfterUndo      string
		BufferDirty, Renamed                  bool
		ForkRows, RowsAfterDelete             int
		Redraws                               []struct {
			Replaced, Outlined, HTML bool
			Before, After            string
		}
	}
	e.drive("drive.mjs", url, map[string]string{
		"approvePrompt": "Please greet the world in a.txt", "proposedText": "hello, world",
		"approveAnswer": "I changed a.txt as asked:", "sessionTitle": "Please greet the world in a.txt",
		"bashPrompt": "Run the tests", "bashAnswer": "The tests ran.",
		"denyPrompt": "Now change b.txt too", "denyReason": "b.txt is frozen", "denyAnswer": "b.txt stays as it was.",
		"openFile": "c.txt", "bufferPrompt": "Shout in c.txt", "bufferText": "LOUD", "bufferAnswer": "c.txt is loud now.",
		"newTitle": "Greetings $(rocket)",
	}, 8*time.Minute, &seen)

	// The approved edit reached the file; the denied one did not.
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "hello, world\n" {
		t.Errorf("a.txt = %q after approving, want %q", got, "hello, world\n")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(got) != "bye\n" {
		t.Errorf("b.txt = %q after denying, want it unchanged", got)
	}
	// Review… on the notification of the approval denied in the chat,
	// still up, says so (it did nothing before).
	if !strings.Contains(seen.StaleReview, `"edit b.txt" was already denied`) {
		t.Errorf("Review… on a decided approval's notification showed %q", seen.StaleReview)
	}
	if !strings.Contains(seen.ApprovalNotification, "edit a.txt") {
		t.Errorf("approval notification %q does not name the edit", seen.ApprovalNotification)
	}
	// A notification cannot show the whole effect: it only opens the card.
	for _, n := range []toast{seen.EditNotification, seen.BashNotification} {
		if !slices.Equal(n.Buttons, []string{"Review…"}) || len(n.Links) > 0 {
			t.Errorf("approval notification %q offers %q and links %q, want only Review… and no link", n.Message, n.Buttons, n.Links)
		}
	}
	if !strings.Contains(seen.BashNotification.Message, `showCommands)"⏎echo pwned`) {
		t.Errorf("the command's notification %q does not show that it goes on past its first line", seen.BashNotification.Message)
	}
	if !strings.Contains(seen.BashCard, bashCommand) {
		t.Errorf("the approval card shows\n%s\nwithout the whole command\n%s", seen.BashCard, bashCommand)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "pwned.txt")); string(got) != "pwned\n" {
		t.Errorf("pwned.txt = %q after approving the command in the card, want %q", got, "pwned\n")
	}
	// The server's progress ("Waiting for approval: bash", "Running bash: …"
	// with the model's arguments) is not drawn in the status bar, where
	// $(name) would be an icon.
	if len(seen.Redraws) != 3 {
		t.Errorf("the card's redraws after a reveal: %+v, want three", seen.Redraws)
	}
	t.Logf("the card redrawn after a reveal: %+v", seen.Redraws)
	for i, r := range seen.Redraws {
		// The deny button holds the focus before the second and third
		// redraws (the third adds a button before it); the card itself
		// may not get it (a webview that lacks the focus).
		if !r.Replaced || r.HTML || !r.Outlined || r.After != r.Before || i >= 1 && r.Before != "deny" {
			t.Errorf("the card redrawn after a reveal (redraw %d): %+v, want a new element, still outlined, the focus where it was", i, r)
		}
	}
	if strings.Contains(seen.StatusWhileWaiting, "Waiting for approval:") {
		t.Errorf("the status bar shows the server's progress: %q", seen.StatusWhileWaiting)
	}
	if seen.TitleIcons != 0 {
		t.Errorf("the Sessions view drew %d icons in a title with $(rocket)", seen.TitleIcons)
	}
	if !strings.Contains(seen.DiffTab, "a.txt") {
		t.Errorf("diff editor tab %q does not name a.txt", seen.DiffTab)
	}
	if !strings.Contains(seen.StatusBefore, "Ask") {
		t.Errorf("status bar %q does not show the Ask policy mode", seen.StatusBefore)
	}
	if !strings.Contains(seen.RunDiffTab, "a.txt") {
		t.Errorf("the run's open diff tab %q does not name a.txt", seen.RunDiffTab)
	}
	if !seen.DiffClosed {
		t.Errorf("the approval's diff editor stayed open after approving")
	}
	if !seen.ReasoningCollapsed {
		t.Errorf("the reasoning is not shown collapsed: %s", seen.ChatAfterApprove)
	}
	if !slices.Contains(seen.FileLinks, "a.txt") {
		t.Errorf("no clickable reference to a.txt in the chat (file links %v)", seen.FileLinks)
	}
	if !seen.SessionListed || !seen.Restored {
		t.Errorf("session listed %v, restored after reload %v", seen.SessionListed, seen.Restored)
	}
	// The edit of the open c.txt went into its buffer (unsaved: the file on
	// disk is untouched), and the editor's undo took it back.
	if !strings.Contains(seen.BufferAfterEdit, "LOUD") || !seen.BufferDirty {
		t.Errorf("c.txt's buffer after the edit = %q (dirty %v), want LOUD, unsaved", seen.BufferAfterEdit, seen.BufferDirty)
	}
	if !strings.Contains(seen.BufferAfterUndo, "quiet") {
		t.Errorf("c.txt's buffer after undo = %q, want quiet", seen.BufferAfterUndo)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "c.txt")); string(got) != "quiet\n" {
		t.Errorf("c.txt on disk = %q, want it unchanged (the edit belongs to the buffer)", got)
	}
	// The model was told of the denial and its reason.
	reqs := prov.Requests()
	if len(reqs) != 8 {
		t.Fatalf("provider got %d requests, want 8", len(reqs))
	}
	if raw := string(reqs[5].Raw); !strings.Contains(raw, "b.txt is frozen") {
		t.Errorf("the request after the denial does not carry the reason: %s", raw)
	}
	// Renamed, forked, and the fork deleted: one session file, titled.
	if !seen.Renamed || seen.ForkRows != 2 || seen.RowsAfterDelete != 1 {
		t.Errorf("sessions view: renamed %v, rows after fork %d (want 2), after deleting the fork %d (want 1)", seen.Renamed, seen.ForkRows, seen.RowsAfterDelete)
	}
	sessions, _ := filepath.Glob(filepath.Join(e.home, "sessions", "*.jsonl"))
	if len(sessions) != 1 {
		t.Fatalf("session files %v, want one", sessions)
	}
	if data, _ := os.ReadFile(sessions[0]); !strings.Contains(string(data), `{"kind":"title","title":"Greetings $(rocket)"}`) {
		t.Errorf("the session file does not record the new title:\n%s", tail(data))
	}
	t.Logf("screenshots in %s", e.shots)
}

// extensionLog returns the octet output channel's log files.
func extensionLog(userDir string) string {
	files, _ := filepath.Glob(filepath.Join(userDir, "logs", "*", "exthost*", "octet.octet-vscode", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(tail(data))
	}
	return b.String()
}

func tail(b []byte) []byte {
	if len(b) > 8000 {
		return b[len(b)-8000:]
	}
	return b
}

// TestVSCodeSubAgents runs a prompt whose root model delegates a task to
// a child agent (octet lsp under unsafe_host, where the delegation tools
// are offered): the child reads a file and answers, the root waits for it
// and answers. The chat shows one card for the child with its path, its
// task, its completed status, its tool call and its answer. Then a second
// child stalls and the card's Stop cancels its run: the card says
// cancelled and the root's run still answers. The
// screenshot is media/subagents.png when OCTET_E2E_SHOTS is the media
// directory.
func TestVSCodeSubAgents(t *testing.T) {
	e := newE2E(t)
	ws := e.ws
	writeFile(t, filepath.Join(ws, "notes.txt"), "release on friday\n")
	bin := e.bin
	// The binary, its flags and the policy of new sessions are
	// machine-scoped: the remote's Machine settings.
	e.settings(nil, map[string]any{
		"octet.path":       bin,
		"octet.args":       []string{"--effect-policy", "unsafe_host"},
		"octet.policyMode": "full-access",
	})

	const childAnswer = "The notes say: release on friday."
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", "agents_spawn", `{"task":"CHILD-ONE: read notes.txt and say what it says"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", "agents_wait", `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("The worker read the notes: the release is on friday.").ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)).ForRequestContaining("CHILD-ONE"),
		providertest.Text(childAnswer).ForRequestContaining("CHILD-ONE"),
		providertest.Reply(providertest.FunctionCall("s2", "agents_spawn", `{"task":"CHILD-TWO: think for a long time"}`)).ForRequestContaining("ROOT-TWO"),
		providertest.Reply(providertest.FunctionCall("w2", "agents_wait", `{"timeout_seconds":120}`)).ForRequestContaining("ROOT-TWO"),
		providertest.Text("The second worker was stopped.").ForRequestContaining("ROOT-TWO"),
		providertest.Stall().ForRequestContaining("CHILD-TWO"),
	)
	url := e.launch(prov)

	var seen struct {
		Failed, Log                             string
		Cards, CardsAfterStop                   int
		Path, Badge, Task, Answer, Tools, Usage string
		RunningActivity, StoppedPath            string
		StoppedHasButton                        bool
		StatusesAfterStop                       []string
		DistinctSessions                        int
	}
	e.drive("drive-agents.mjs", url, map[string]string{
		"prompt": "ROOT-PROMPT: ask a worker what notes.txt says", "rootAnswer": "the release is on friday.",
		"stopPrompt": "ROOT-TWO: start a slow worker", "stopAnswer": "The second worker was stopped.",
	}, 5*time.Minute, &seen)
	if seen.Cards != 1 {
		t.Errorf("%d sub-agent cards, want 1", seen.Cards)
	}
	if !strings.HasPrefix(seen.Path, "root/") {
		t.Errorf("card path %q, want the child's agent path root/…", seen.Path)
	}
	if !strings.Contains(strings.ToLower(seen.Badge), "completed") {
		t.Errorf("card badge %q, want completed", seen.Badge)
	}
	if !strings.Contains(seen.Task, "read notes.txt") {
		t.Errorf("card task %q, want the spawned task", seen.Task)
	}
	if !strings.Contains(seen.Answer, childAnswer) {
		t.Errorf("card answer %q, want the child's %q", seen.Answer, childAnswer)
	}
	if !strings.Contains(seen.Tools, "read") || !strings.Contains(seen.Tools, "notes.txt") {
		t.Errorf("card tool calls %q, want the child's read of notes.txt", seen.Tools)
	}
	// Stop on the running second child cancelled its run only: the card
	// says cancelled (no Stop any more) and the root's run went on to its
	// answer (the driver waited for it).
	// (Each run's team names its children afresh: both may be root/worker1.)
	if !slices.Equal(seen.StatusesAfterStop, []string{"agent-completed", "agent-cancelled"}) || seen.DistinctSessions != 2 ||
		!strings.HasPrefix(seen.StoppedPath, "root/") || seen.StoppedHasButton {
		t.Errorf("after Stop: cards %v of %d sessions (want the first completed, the second cancelled, 2 sessions), cancelled card %q, Stop button still there: %v",
			seen.StatusesAfterStop, seen.DistinctSessions, seen.StoppedPath, seen.StoppedHasButton)
	}
	t.Logf("card: %+v; screenshots in %s", seen, e.shots)
}

// TestVSCodePlanAndImages pastes an image into the chat's prompt and
// drops another on it (two chips), sends the prompt (the model gets both
// as input_image items), and shows the model's plan as one card updated
// in place by its two update_plan calls, with no tool item for them; a
// reload restores the session with its plan card.
func TestVSCodePlanAndImages(t *testing.T) {
	e := newE2E(t)
	e.settings(nil, map[string]any{"octet.path": e.bin})

	pasted := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR pasted"
	dropped := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR dropped!"
	prov := providertest.New(t)
	prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("p1", "update_plan", `{"explanation":"look first","plan":[{"step":"Look at the images","status":"in_progress"},{"step":"Compare them","status":"pending"}]}`)),
		providertest.Reply(providertest.FunctionCall("p2", "update_plan", `{"plan":[{"step":"Look at the images","status":"completed"},{"step":"Compare them","status":"in_progress"}]}`)),
		providertest.Text("Both are tiny PNG headers."),
	)
	url := e.launch(prov)
	var seen struct {
		Failed, Log, Chips              string
		ChipsAfterSend                  int
		UserImages, ToolItems           []string
		PlanCards, PlanCardsAfterReload int
		Plan, PlanAfterReload           string
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	e.drive("drive-plan.mjs", url, map[string]string{
		"pasted": b64(pasted), "dropped": b64(dropped),
		"prompt": "What do these show?", "answer": "Both are tiny PNG headers.",
	}, 5*time.Minute, &seen)
	if !strings.Contains(seen.Chips, "pasted.png") || !strings.Contains(seen.Chips, "dropped.png") || seen.ChipsAfterSend != 0 || len(seen.UserImages) != 2 {
		t.Errorf("chips %q, left after sending %d, on the prompt %q", seen.Chips, seen.ChipsAfterSend, seen.UserImages)
	}
	reqs := prov.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, img := range []string{pasted, dropped} {
		if url := "data:image/png;base64," + b64(img); !strings.Contains(string(reqs[0].Raw), `"type":"input_image","image_url":"`+url+`"`) {
			t.Errorf("the request lacks the image %s", url)
		}
	}
	want := []string{"1 of 2 done", "Look at the images", "Compare them"}
	for _, w := range want {
		if !strings.Contains(seen.Plan, w) || !strings.Contains(seen.PlanAfterReload, w) {
			t.Errorf("plan card %q (after a reload %q) lacks %q", seen.Plan, seen.PlanAfterReload, w)
		}
	}
	if seen.PlanCards != 1 || seen.PlanCardsAfterReload != 1 || len(seen.ToolItems) != 0 {
		t.Errorf("plan cards %d (after a reload %d), tool items %q: want one card, no update_plan items", seen.PlanCards, seen.PlanCardsAfterReload, seen.ToolItems)
	}
	t.Logf("screenshots in %s", e.shots)
}
