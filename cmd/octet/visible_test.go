package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// hostileText carries what a model or a repository could send a terminal:
// an OSC title sequence, a screen clear and a bidirectional override.
const hostileText = "t\x1b]0;pwned\x07i\x1b[2Jtle\u202ecba"

// checkVisible fails when out carries a terminal control or a reordering
// character, or lacks hostileText's characters in visible form.
func checkVisible(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("%s passed a control or bidi character to the terminal:\n%q", what, out)
	}
	if want := "t^[]0;pwned^Gi^[[2Jtle⟨U+202E⟩cba"; !strings.Contains(out, want) {
		t.Errorf("%s does not show %q:\n%s", what, want, out)
	}
}

// TestSessionTitlesShownVisibly: a session titled with terminal escape
// sequences and a bidi override is printed by `octet sessions list` and
// `octet sessions show` with each of them made visible, not interpreted
// and not hidden.
func TestSessionTitlesShownVisibly(t *testing.T) {
	x := newExecEnv(t)
	s, err := session.Create(filepath.Join(x.home, "sessions"), session.Header{Cwd: x.ws, Title: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTitle(hostileText); err != nil {
		t.Fatal(err)
	}
	s.Close()
	list := runCLI(t, x.ws, x.vars, "sessions", "list")
	checkVisible(t, "sessions list", list.stdout)
	show := runCLI(t, x.ws, x.vars, "sessions", "show", s.Header().ID)
	checkVisible(t, "sessions show", show.stdout)
}

// TestExecShowsToolArgumentsVisibly: octet exec's human output names a
// call's arguments with their controls and bidi characters made visible.
func TestExecShowsToolArgumentsVisibly(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("c1", "read", `{"path":"`+strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`).Replace(hostileText)+`"}`)),
		providertest.Text("done"),
	)
	r := runCLI(t, x.ws, x.vars, "exec", "read it")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	checkVisible(t, "exec's tool line", r.stderr)
}
