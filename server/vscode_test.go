package server

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestVSCodeJSONRPCClient drives the built `octet lsp` with vscode-jsonrpc,
// the JSON-RPC stack under VS Code's vscode-languageclient
// (testdata/vscode/client.js): handshake, a prompt whose edit is approved
// through octet/confirmEffect, a second prompt cancelled through a
// CancellationToken ($/cancelRequest), resume, shutdown and exit. It is
// skipped unless node is installed and `npm install` has been run in
// testdata/vscode (.ci/run does both when npm is available).
func TestVSCodeJSONRPCClient(t *testing.T) {
	vscodeClient(t)
	w := newRealWorld(t, testbin.Octet(t))
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\n")
	editScript(&stack{&hosttest.Stack{Provider: w.prov}})
	w.prov.Enqueue(providertest.Text(strings.Repeat("word ", 200)).StallAfter(8))

	var got struct {
		Version  int
		Commands []string
		Confirms []struct {
			Tool, Title, Diff string
			DigestLen         int
		}
		Progress []string
		Events   []struct {
			Seq         int64
			RunID, Kind string
		}
		Unhandled []string
		Errors    []string
		First     promptAnswer
		Second    promptAnswer
		Resume    struct{ Events, LastSeq, Transcript int }
		ExitCode  int
	}
	w.runNode(t, "client.js", &got)
	if got.Version != ProtocolVersion || strings.Join(got.Commands, ",") != "octet.prompt,octet.cancel,octet.approve,octet.deny" {
		t.Errorf("capabilities: version %d, commands %v", got.Version, got.Commands)
	}
	if got.First.Outcome != "completed" || got.Second.Outcome != "cancelled" || got.Second.RunID == "" {
		t.Errorf("prompts: first %+v, second %+v", got.First, got.Second)
	}
	if readFile(t, filepath.Join(w.ws, "a.txt")) != "goodbye world\n" {
		t.Errorf("a.txt not changed by the approved edit")
	}
	if len(got.Confirms) != 1 || got.Confirms[0].Tool != "edit" || got.Confirms[0].DigestLen != 64 || !strings.Contains(got.Confirms[0].Diff, "+goodbye world") {
		t.Errorf("confirmations %+v", got.Confirms)
	}
	var begins, ends int
	for _, k := range got.Progress {
		switch k {
		case "begin":
			begins++
		case "end":
			ends++
		}
	}
	if begins != 2 || ends != 2 {
		t.Errorf("progress kinds %v, want a begin and an end per run", got.Progress)
	}
	for i, ev := range got.Events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d (events %+v)", i, ev.Seq, got.Events)
		}
	}
	// The resume's session_state comes after what the resume returned.
	evs := got.Events
	if n := len(evs); n > 0 && evs[n-1].Kind == "session_state" {
		evs = evs[:n-1]
	}
	if n := len(evs); n == 0 || evs[n-1].Kind != "run_finished" || got.Resume.LastSeq != n || got.Resume.Events != n {
		t.Errorf("%d events (%+v); resume %+v", n, got.Events, got.Resume)
	}
	if len(got.Unhandled) != 0 || len(got.Errors) != 0 {
		t.Errorf("unhandled notifications %v, connection errors %v", got.Unhandled, got.Errors)
	}
	if got.ExitCode != 0 {
		t.Errorf("octet lsp exited %d after shutdown and exit", got.ExitCode)
	}
}
