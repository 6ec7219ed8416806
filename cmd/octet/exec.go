package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/session"
)

const execUsage = `octet exec [flags] "prompt"   (or - to read the prompt from stdin)`

// maxStdinPrompt bounds a prompt read from stdin (octet exec -).
const maxStdinPrompt = 1 << 20

// execOptions are exec's own flags.
type execOptions struct {
	json, approve, deny bool
	sessionID           string
	maxTurns            int
}

func runExec(ctx context.Context, args []string, e env) error {
	var flags config.Flags
	var opts execOptions
	fs := newFlagSet("exec", execUsage, e.stderr)
	addPolicyFlags(fs, &flags)
	fs.BoolVar(&opts.json, "json", false, "print events as JSON lines on stdout instead of the answer text")
	fs.BoolVar(&opts.approve, "approve", false, "approve every effect confirmation without asking")
	fs.BoolVar(&opts.deny, "deny", false, "deny every effect confirmation without asking")
	fs.IntVar(&opts.maxTurns, "max-turns", 0, "stop the run after `n` provider turns (default 100)")
	fs.StringVar(&opts.sessionID, "session", "", "continue the session with this `id` (or an unambiguous prefix of it) instead of starting a new one")
	err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 || strings.TrimSpace(fs.Arg(0)) == "" {
		return usageErrorf("exec needs exactly one prompt argument: %s", execUsage)
	}
	if opts.maxTurns < 0 {
		return usageErrorf("--max-turns must not be negative")
	}
	if opts.approve && opts.deny {
		return usageErrorf("--approve conflicts with --deny; pass at most one")
	}
	prompt := fs.Arg(0)
	if prompt == "-" {
		if prompt, err = readPrompt(e.stdin); err != nil {
			return err
		}
	}
	log := newLogger(e.stderr, e.lookup)
	home, err := config.HomeDir(e.lookup)
	if err != nil {
		return err
	}
	// A continued session keeps its own workspace; a new one uses the
	// current directory.
	ws := e.cwd
	var sess *session.Session
	if opts.sessionID != "" {
		if sess, err = openSession(session.Dir(home), opts.sessionID); err != nil {
			return err
		}
		defer sess.Close()
		ws = sess.Header().Cwd
	}
	cfg, err := loadConfig(e, ws, flags, log)
	if err != nil {
		return err
	}
	key, err := loadAPIKey(e, cfg)
	if err != nil {
		return err
	}
	st, err := newStack(cfg, key, ws, log)
	if err != nil {
		return err
	}
	defer st.Close()
	ap := &termApprover{mode: askTerminal, open: e.tty, notice: e.stderr}
	switch {
	case opts.approve:
		ap.mode, ap.why = approveAll, "--approve"
	case opts.deny:
		ap.mode = denyAll
	}
	if sess == nil {
		sess, err = session.Create(cfg.SessionsDir(), session.Header{Cwd: ws, Title: oneLine(prompt, 80)})
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		defer sess.Close()
	}
	st.maxTurns = opts.maxTurns
	res, err := drive(ctx, st, sess, ap, prompt, opts.json, e)
	if err != nil {
		return err
	}
	if !opts.json {
		fmt.Fprintf(e.stderr, "session %s: %s\n", sess.Header().ID, sess.Path())
	}
	return outcomeError(res, cfg)
}

// readPrompt reads the whole prompt from in (octet exec -).
func readPrompt(in io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(in, maxStdinPrompt+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the prompt from stdin: %w", err)
	case len(b) > maxStdinPrompt:
		return "", usageErrorf("the prompt on stdin is larger than %d bytes", maxStdinPrompt)
	case !utf8.Valid(b):
		return "", usageErrorf("the prompt on stdin is not valid UTF-8 text")
	case strings.TrimSpace(string(b)) == "":
		return "", usageErrorf("the prompt on stdin is empty (octet exec - reads the prompt from stdin until end of file)")
	}
	return string(b), nil
}

// openSession opens session id in dir for appending.
func openSession(dir, id string) (*session.Session, error) {
	path, err := resolveSession(dir, id)
	if err != nil {
		return nil, err
	}
	s, err := session.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", strings.TrimSuffix(filepath.Base(path), ".jsonl"), err)
	}
	return s, nil
}

// drive runs one prompt on a fresh agent for sess and renders its events
// (text, or JSON lines with asJSON) until the run has settled. The loop
// that renders is the only writer of the terminal: ap's notices and
// prompts are written by it, after the events that came before them.
func drive(ctx context.Context, st *stack, sess *session.Session, ap *termApprover, prompt string, asJSON bool, e env) (agent.RunResult, error) {
	term := newTerminal()
	defer term.stop()
	ap.term = term
	var render func(agent.Event)
	endLine := func() {}
	var jr *jsonRenderer
	children := &childRenderer{term: term, notes: e.stderr, parent: sess.Header().ID, approver: ap}
	if asJSON {
		jr = &jsonRenderer{out: e.stdout, sessionID: sess.Header().ID}
		render, children.jr = jr.event, jr
	} else {
		tr := newTextRenderer(e.stdout, e.stderr, e.stdoutIsTerminal)
		tr.dim = e.stderrIsTerminal
		tr.result = func(callID string) *session.ToolResult { return findResult(sess, callID) }
		render, endLine = tr.event, tr.endLine
	}
	children.endLine = func() { endLine() }
	st.delegation = children.install
	// A continued session keeps the effect policy it recorded (when the
	// launch policy still allows it), as it would in an editor.
	a, release, err := st.newAgent(sess, ap, nil, host.NewRuleBook(sess, st.log).RecordedPolicy())
	if err != nil {
		return agent.RunResult{}, fmt.Errorf("start agent: %w", err)
	}
	defer release()
	run, err := a.Prompt(ctx, prompt, agent.PromptOptions{})
	if err != nil {
		return agent.RunResult{}, fmt.Errorf("start run: %w", err)
	}
	if jr != nil {
		jr.runID = run.ID()
	}
	ownTerminal(run.Events(), term, render, endLine)
	res := run.Wait()
	if jr != nil && jr.err != nil {
		st.log.Warn("write events", slog.Any("err", jr.err))
	}
	return res, nil
}

// ownTerminal renders events until the stream closes and runs term's
// tasks in between: a task (an approval prompt) runs after every event
// already emitted, since the run emitted them before it asked, and on a
// line of its own.
func ownTerminal(events <-chan agent.Event, term *terminal, render func(agent.Event), endLine func()) {
	defer term.stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			render(ev)
		case task := <-term.asks:
			if !renderReady(events, render) {
				events = nil // closed: only tasks are left until stop
			}
			endLine()
			task.fn()
			close(task.done)
			if events == nil {
				return
			}
		}
	}
}

// renderReady renders the events already waiting in events; it reports
// false when the stream has closed.
func renderReady(events <-chan agent.Event, render func(agent.Event)) bool {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return false
			}
			render(ev)
		default:
			return true
		}
	}
}

// findResult returns the durable result of callID, searched from the end
// of sess's branch (a result is appended before its tool_finished).
func findResult(sess *session.Session, callID string) *session.ToolResult {
	br := sess.Branch()
	for i := len(br) - 1; i >= 0; i-- {
		if r := br[i].Result; r != nil && r.CallID == callID {
			return r
		}
	}
	return nil
}

// outcomeError maps a run result to the documented exit status.
func outcomeError(res agent.RunResult, cfg *config.Config) error {
	switch res.Outcome {
	case agent.OutcomeCompleted:
		return nil
	case agent.OutcomeCancelled:
		return &exitError{code: exitCancelled, err: fmt.Errorf("run cancelled")}
	case agent.OutcomeMaxTurns:
		return &exitError{code: exitMaxTurns, err: fmt.Errorf("run stopped at its turn limit (max_turns)")}
	}
	msg := "run failed"
	if res.Err != nil {
		msg += ": " + res.Err.Error()
	}
	if hint := providerHint(res.Err, cfg.BaseURL.Value, cfg.Model.Value); hint != "" {
		msg += "\n  " + hint
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("%s", msg)}
}
