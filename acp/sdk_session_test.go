package acp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// rpcResult is a request's answer as client.js's call reports it: the
// result, or error.
type rpcResult struct {
	Error *struct {
		Code    int
		Message string
	}
}

// configOption is one SessionConfigOption as the SDK decoded it.
type configOption struct {
	ID, Category, Type, CurrentValue string
	Options                          []struct{ Value, Name string }
}

// option returns the option id of opts.
func option(opts []configOption, id string) configOption {
	for _, o := range opts {
		if o.ID == id {
			return o
		}
	}
	return configOption{}
}

// listed is a session/list answer.
type listed struct {
	rpcResult
	Sessions []struct {
		SessionID, Cwd, UpdatedAt string
		Title                     *string
	}
	NextCursor *string
}

func (l listed) ids() []string {
	var ids []string
	for _, s := range l.Sessions {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// TestSDKSessionLifecycle: the SDK's client uses every stable session
// method. session/new answers the modes and the config options (mode,
// model, thought_level) and announces the slash commands;
// set_config_option answers every option's new state (an unknown model
// is refused); set_mode also sends current_mode_update and
// config_option_update; the first prompt gives the session its title
// (session_info_update) and each response a usage_update; session/list
// lists both sessions newest first with title and updatedAt, and only
// the workspace's with cwd; session/close frees the session (a prompt is
// then refused) and session/resume reopens it without replay;
// session/load of the session open here replays it; session/delete
// removes the other one (its file, and from the list).
func TestSDKSessionLifecycle(t *testing.T) {
	w := newWorld(t)
	other := filepath.Join(w.tmp, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "OCTET_TEST_OTHER_WORKSPACE="+other)
	w.prov.Enqueue(providertest.Text("Answer one."), providertest.Text("Answer two."))
	type state struct {
		rpcResult
		SessionID     string
		ConfigOptions []configOption
		Modes         struct{ CurrentModeID string }
	}
	var got struct {
		sdkOut
		A, B                                state
		AfterNew, AfterResume               []string
		SetMode, SetThought, SetModel       state
		BadModel, LegacyMode, Close, Delete rpcResult
		DeleteAgain, PromptClosed           rpcResult
		AfterSetMode, AfterPrompt           []map[string]any
		ListAll, ListWs, ListAfterDelete    listed
		Resume, Load                        state
		Again                               struct{ StopReason string }
		AfterLoad                           []string
	}
	w.run(t, "lifecycle", &got)
	a := got.A.SessionID
	if m := option(got.A.ConfigOptions, "mode"); m.Category != "mode" || m.Type != "select" || m.CurrentValue != "controlled" || len(m.Options) != 2 ||
		m.Options[0].Name != "Ask" || m.Options[1].Name != "Auto (read-only)" {
		t.Errorf("mode option %+v: want Ask and Auto (read-only), no Full access above the launch policy", m)
	}
	if m := option(got.A.ConfigOptions, "model"); m.Category != "model" || m.CurrentValue == "" || len(m.Options) < 2 {
		t.Errorf("model option %+v", m)
	}
	if m := option(got.A.ConfigOptions, "thought_level"); m.Category != "thought_level" || len(m.Options) != 7 {
		t.Errorf("thought_level option %+v", m)
	}
	if !slices.Contains(got.AfterNew, "available_commands_update") {
		t.Errorf("updates after session/new %v: no available_commands_update", got.AfterNew)
	}
	if v := option(got.SetMode.ConfigOptions, "mode").CurrentValue; v != "controlled_bash_approval" {
		t.Errorf("set_config_option mode answered %q", v)
	}
	if v := option(got.SetThought.ConfigOptions, "thought_level").CurrentValue; v != "high" {
		t.Errorf("set_config_option thought_level answered %q", v)
	}
	if v := option(got.SetModel.ConfigOptions, "model").CurrentValue; v != "gpt-5.1-codex-mini" {
		t.Errorf("set_config_option model answered %q", v)
	}
	if got.BadModel.Error == nil || got.BadModel.Error.Code != codeInvalidParams || !strings.Contains(got.BadModel.Error.Message, "no-such-model") {
		t.Errorf("unknown model: %+v", got.BadModel.Error)
	}
	var kinds []string
	for _, u := range got.AfterSetMode {
		kinds = append(kinds, u["sessionUpdate"].(string))
	}
	if got.LegacyMode.Error != nil || !slices.Equal(kinds, []string{"current_mode_update", "config_option_update"}) {
		t.Errorf("set_mode: %+v, updates %v", got.LegacyMode.Error, kinds)
	}
	// The prompt: the title, then (after the answer) usage and the
	// session's new updatedAt; the request used the model and effort set.
	kinds = nil
	for _, u := range got.AfterPrompt {
		kinds = append(kinds, u["sessionUpdate"].(string))
	}
	if !slices.Equal(kinds, []string{"session_info_update", "usage_update", "session_info_update"}) || got.AfterPrompt[0]["title"] != "First prompt of A" {
		t.Errorf("updates of the first prompt %v: want the title, usage, updatedAt", got.AfterPrompt)
	}
	if body := w.prov.Requests()[0].Body; body["model"] != "gpt-5.1-codex-mini" || !strings.Contains(string(w.prov.Requests()[0].Raw), `"effort":"high"`) {
		t.Errorf("the prompt's request used model %v: %s", body["model"], w.prov.Requests()[0].Raw)
	}
	if ids := got.ListAll.ids(); !slices.Equal(ids, []string{got.B.SessionID, a}) {
		t.Errorf("session/list %v, want B then A", ids)
	}
	if ids := got.ListWs.ids(); !slices.Equal(ids, []string{a}) || got.ListWs.Sessions[0].Title == nil ||
		*got.ListWs.Sessions[0].Title != "First prompt of A" || got.ListWs.Sessions[0].UpdatedAt == "" || got.ListWs.NextCursor != nil {
		t.Errorf("session/list cwd: %+v", got.ListWs)
	}
	if got.Close.Error != nil || got.PromptClosed.Error == nil || got.PromptClosed.Error.Code != codeResourceNotFound {
		t.Errorf("close %+v, then prompt %+v", got.Close.Error, got.PromptClosed.Error)
	}
	if got.Resume.Error != nil || !slices.Equal(got.AfterResume, []string{"available_commands_update"}) || got.Again.StopReason != stopEndTurn {
		t.Errorf("resume %+v: updates %v (no replay), then %q", got.Resume.Error, got.AfterResume, got.Again.StopReason)
	}
	if got.Load.Error != nil || !slices.Contains(got.AfterLoad, "user_message_chunk:after resume") || !slices.Contains(got.AfterLoad, "agent_message_chunk:Answer two.") {
		t.Errorf("load of a session open here: %+v, replayed %v", got.Load.Error, got.AfterLoad)
	}
	// Deleting it again: octet answers resource_not_found, which the SDK
	// takes as success (the end state is the same, as ACP recommends).
	if got.Delete.Error != nil || slices.Contains(got.ListAfterDelete.ids(), got.B.SessionID) || got.DeleteAgain.Error != nil {
		t.Errorf("delete %+v, list after %v, delete again %+v", got.Delete.Error, got.ListAfterDelete.ids(), got.DeleteAgain.Error)
	}
	if _, err := os.Stat(filepath.Join(w.home, "sessions", got.B.SessionID+".jsonl")); err == nil {
		t.Error("the deleted session's file is still there")
	}
}

// TestSDKSlashCommands: /diff shows the edit the last prompt made,
// /rewind restores the file and takes the conversation back, /diff then
// shows nothing, /review sends octet's review prompt with the person's
// words, and /compact summarizes the conversation, shown with
// compaction_update to a client that advertised session.compaction.
func TestSDKSlashCommands(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(w.ws, "a.txt")
	writeFile(t, path, "hello\n")
	w.prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Text("Edited."),
		providertest.Text("The review."),
		providertest.Text("THE SUMMARY"),
	)
	type said struct {
		Answer struct{ StopReason string }
		Said   string
	}
	var got struct {
		sdkOut
		Commands                                 []struct{ Name string }
		Diff, Rewind, DiffAfter, Review, Compact said
		Compaction                               []struct {
			CompactionID, Status string
			Summary              []struct{ Text string }
		}
	}
	w.run(t, "commands", &got)
	var names []string
	for _, c := range got.Commands {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"compact", "diff", "rewind", "init", "review"}) {
		t.Errorf("available commands %v", names)
	}
	if !strings.Contains(got.Diff.Said, "-hello\n+goodbye") || got.Diff.Answer.StopReason != stopEndTurn {
		t.Errorf("/diff said %q", got.Diff.Said)
	}
	if !strings.Contains(got.Rewind.Said, "Restored `a.txt`") || readFile(t, path) != "hello\n" {
		t.Errorf("/rewind said %q; a.txt = %q", got.Rewind.Said, readFile(t, path))
	}
	if !strings.Contains(got.DiffAfter.Said, "changed no file") {
		t.Errorf("/diff after /rewind said %q", got.DiffAfter.Said)
	}
	reqs := w.prov.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d provider requests, want the edit's two, the review, the summary", len(reqs))
	}
	review := string(reqs[2].Raw)
	if !strings.Contains(review, "Review the uncommitted changes") || !strings.Contains(review, "look at the tests") || strings.Contains(review, "edit a.txt") {
		t.Errorf("the /review request (after the rewind took the edit away): %s", review)
	}
	if got.Review.Said != "The review." || !strings.Contains(got.Compact.Said, "Compacted the conversation") {
		t.Errorf("/review said %q, /compact said %q", got.Review.Said, got.Compact.Said)
	}
	// The client advertised session.compaction: the compaction is shown
	// as it goes, ending with its summary.
	if c := got.Compaction; len(c) != 2 || c[0].Status != "in_progress" || c[1].Status != "completed" || c[0].CompactionID != c[1].CompactionID ||
		len(c[1].Summary) != 1 || c[1].Summary[0].Text != "THE SUMMARY" {
		t.Errorf("compaction_update %+v", c)
	}
}

// TestSDKAuthentication: without a key octet advertises the terminal
// method (octet login) to a client that can run one and answers
// session/new with auth_required (-32000); once the client ran the
// method (here with the key on stdin) and authenticated with octet's
// other method, session/new works and the prompt's request carries a
// key.
func TestSDKAuthentication(t *testing.T) {
	w := newWorld(t)
	// A provider that is not on loopback (a loopback one needs no key):
	// a name under the reserved .test domain, reached through the
	// scripted server acting as the HTTP proxy (it serves the absolute
	// request URI's path).
	proxy := strings.TrimSuffix(w.prov.URL(), "/v1")
	w.env = append(w.env, "OPENAI_BASE_URL=http://provider.octet.test/v1",
		"HTTP_PROXY="+proxy, "http_proxy="+proxy, "NO_PROXY=", "no_proxy=")
	w.prov.Enqueue(providertest.Text("Authenticated."))
	var got struct {
		sdkOut
		Init struct {
			AuthMethods []struct {
				ID, Type string
				Args     []string
			}
		}
		Before       rpcResult
		Login        struct{ Code int }
		Authenticate rpcResult
	}
	w.run(t, "auth", &got)
	var methods []string
	for _, m := range got.Init.AuthMethods {
		methods = append(methods, m.Type+":"+m.ID+":"+strings.Join(m.Args, " "))
	}
	if !slices.Equal(methods, []string{"terminal:octet-login:login", ":octet-credentials:"}) {
		t.Errorf("authMethods %v", methods)
	}
	if got.Before.Error == nil || got.Before.Error.Code != codeAuthRequired || !strings.Contains(got.Before.Error.Message, "octet login") {
		t.Errorf("session/new without a key: %+v", got.Before.Error)
	}
	if got.Login.Code != 0 || got.Authenticate.Error != nil || got.Answer.StopReason != stopEndTurn {
		t.Fatalf("login exit %d, authenticate %+v, prompt %q", got.Login.Code, got.Authenticate.Error, got.Answer.StopReason)
	}
	reqs := w.prov.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") == "" {
		t.Errorf("the prompt's request carried no key: %+v", reqs)
	}
	var creds []byte
	creds, _ = os.ReadFile(filepath.Join(w.home, "credentials"))
	if !strings.Contains(string(creds), "sk-test-from-login") {
		t.Errorf("the credentials file: %q", creds)
	}
}
