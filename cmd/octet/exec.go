package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/stack"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

const execUsage = `octet exec [flags] "prompt"   (or - to read the prompt from stdin; --compact --session ID takes none)`

// maxStdinPrompt bounds a prompt read from stdin (octet exec -), and the
// stdin context block appended to a prompt argument.
const maxStdinPrompt = 1 << 20

// stdinWaitNotice is how long exec reads stdin for a context block before
// it says on stderr what it is waiting for.
const stdinWaitNotice = 2 * time.Second

// execOptions are exec's own flags, validated.
type execOptions struct {
	json, approve, deny bool
	sessionID           string
	last, ephemeral     bool
	// maxTurns is 0 when --max-turns was not given (the agent's default).
	maxTurns int
	// dir is the absolute working directory (--cd, else the process's).
	dir string
	// output is the absolute path -o names ("": none).
	output string
	prompt string
	// images are the --image files, read and checked.
	images []provider.Image
	// compact summarizes the continued session instead of prompting it.
	compact bool
}

func runExec(ctx context.Context, args []string, e env) error {
	flags, opts, err := parseExec(args, e)
	if err != nil {
		return err
	}
	var prompt string
	if !opts.compact {
		if prompt, err = execPrompt(ctx, opts.prompt, e); err != nil {
			return err
		}
	}
	log := newLogger(e.stderr, e.lookup)
	home, err := config.HomeDir(e.lookup)
	if err != nil {
		return err
	}
	ws, sess, err := continuedSession(home, &opts, e)
	if err != nil {
		return err
	}
	if sess != nil {
		defer sess.Close()
	}
	cfg, err := stack.LoadConfig(e.lookup, ws, flags, log)
	if err != nil {
		return err
	}
	if err := checkToolsFlag(cfg); err != nil {
		return err
	}
	key, err := stack.LoadAPIKey(e.lookup, cfg)
	if err != nil {
		return err
	}
	st, err := stack.New(cfg, key, ws, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(opts.images) > 0 && !st.Model().Images {
		return usageErrorf("--image: model %s is not known to accept images; if it does, declare images = true in [models.%q] of %s",
			visible(st.Model().Name), st.Model().Name, filepath.Join(cfg.Home, "config.toml"))
	}
	ap := execApprover(opts, e)
	created := false
	if sess == nil {
		dir := cfg.SessionsDir()
		if opts.ephemeral {
			tmp, err := os.MkdirTemp("", "octet-ephemeral-")
			if err != nil {
				return fmt.Errorf("ephemeral session: %w", err)
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		sess, err = session.Create(dir, session.Header{Cwd: ws, Title: oneLine(opts.prompt, 80)})
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		defer sess.Close()
		created = true
	}
	st.MaxTurns = opts.maxTurns
	out, ctx, cancel := watchOutput(ctx, e.stdout)
	defer cancel(nil)
	e.stdout = out
	start := prompting(ctx, prompt, opts.images)
	if opts.compact {
		start = func(a *agent.Agent) (*agent.Run, error) { return a.Compact(ctx, agent.PromptOptions{}) }
	}
	res, err := drive(ctx, st, sess, ap, start, opts.json, e)
	if werr := out.failed(); werr != nil {
		// The run settled: -o gets what it has, as for any run that failed.
		if opts.output != "" && err == nil {
			if err := writeAnswer(opts.output, res.answer); err != nil {
				fmt.Fprintf(e.stderr, "octet: -o: %v\n", err)
			}
		}
		where := "octet sessions show " + sess.Header().ID + " shows it"
		if opts.ephemeral {
			where = "session " + sess.Header().ID + " not kept (--ephemeral)"
		}
		return outputError(werr, where)
	}
	if err != nil {
		if created && sess.Len() == 0 {
			// No run started: the session holds nothing worth keeping.
			sess.Close()
			_ = session.Remove(sess.Path())
		}
		return err
	}
	return reportExec(e, opts, cfg, sess, res)
}

// reportExec ends a run that settled: it writes -o, the --json result or
// where the session is kept, and the note of an answer cut at the output
// limit, and returns the run's outcome as an error (nil: completed).
func reportExec(e env, opts execOptions, cfg *config.Config, sess *session.Session, res execResult) error {
	kept := sess.Header().ID
	if opts.ephemeral {
		kept = ""
	}
	outErr := outcomeError(res.RunResult, cfg, kept)
	var writeErr error
	if opts.output != "" {
		if writeErr = writeAnswer(opts.output, res.answer); writeErr != nil {
			writeErr = fmt.Errorf("-o: %w", writeErr)
			if outErr == nil {
				outErr = writeErr
			}
		}
	}
	switch {
	case opts.json:
		writeResult(e.stdout, sess.Header().ID, res, exitCode(outErr), outErr)
	case opts.ephemeral:
		fmt.Fprintf(e.stderr, "session %s not kept (--ephemeral)\n", sess.Header().ID)
	default:
		fmt.Fprintf(e.stderr, "session %s: %s\n", sess.Header().ID, sess.Path())
	}
	if writeErr != nil && writeErr != outErr {
		fmt.Fprintf(e.stderr, "octet: %v\n", writeErr)
	}
	if res.Outcome == agent.OutcomeCompleted && host.FinalStopReason(sess, res.RunID) == "max_output_tokens" {
		fmt.Fprintf(e.stderr, "octet: %s\n", truncatedNote(kept))
	}
	return outErr
}

// truncatedNote says that a completed run's last answer stopped at the
// model's output limit, and how to go on in the kept session sid.
func truncatedNote(sid string) string {
	s := "the answer stopped at the model's output limit (max_output_tokens): it is incomplete"
	if sid != "" {
		s += fmt.Sprintf("; to go on, octet exec --session %s \"continue\"", sid)
	}
	return s
}

// continuedSession opens the session exec continues (--session, or
// --last: the newest of the working directory), if any, with the
// workspace it runs in: a continued session keeps its own workspace; a
// new one uses the working directory.
func continuedSession(home string, opts *execOptions, e env) (string, *session.Session, error) {
	ws := opts.dir
	if opts.last {
		id, err := lastSession(session.Dir(home), ws)
		if err != nil {
			return "", nil, err
		}
		opts.sessionID = id
	}
	if opts.sessionID == "" {
		return ws, nil, nil
	}
	sess, err := openSession(session.Dir(home), opts.sessionID)
	if err != nil {
		return "", nil, err
	}
	if runningElsewhere(sess) {
		// octet/prompt refuses a session with an active run; so does exec,
		// or the two runs would interleave on one branch.
		sess.Close()
		return "", nil, &exitError{code: exitFailed, err: fmt.Errorf("session %s has a run in progress in another process (an editor, or a running octet exec); wait for it to end, or stop it, then continue the session", sess.Header().ID)}
	}
	ws = sess.Header().Cwd
	if _, err := os.Stat(ws); errors.Is(err, fs.ErrNotExist) {
		sess.Close()
		return "", nil, usageErrorf("session %s started in %s, which no longer exists: create the directory again to continue the session there, or start a new session", sess.Header().ID, visible(ws))
	}
	if filepath.Clean(ws) != opts.dir {
		fmt.Fprintf(e.stderr, "continuing session %s in its own directory %s\n", sess.Header().ID, visible(ws))
	}
	return ws, sess, nil
}

// execApprover answers exec's approvals: on the terminal, or all of them
// as --approve or --deny says.
func execApprover(opts execOptions, e env) *termApprover {
	ap := &termApprover{mode: askTerminal, open: e.tty, notice: e.stderr}
	switch {
	case opts.approve:
		ap.mode, ap.why = approveAll, "--approve"
	case opts.deny:
		ap.mode = denyAll
	}
	return ap
}

// execPrompt is the prompt of exec's command line: read from stdin for
// "-", else with the data piped to stdin appended.
func execPrompt(ctx context.Context, prompt string, e env) (string, error) {
	switch {
	case prompt == "-":
		return readPrompt(e.stdin)
	case e.stdinIsData:
		block, err := readStdinBlock(ctx, e.stdin, e.stderr)
		if err != nil {
			return "", err
		}
		prompt += block
	}
	return prompt, nil
}

// parseExec parses and validates exec's command line: every flag value
// is checked here, before anything is read or started.
func parseExec(args []string, e env) (config.Flags, execOptions, error) {
	var flags config.Flags
	var opts execOptions
	fs := newFlagSet("exec", execUsage, e.stdout)
	addPolicyFlags(fs, &flags)
	fs.BoolVar(&opts.json, "json", false, "print events as JSON lines on stdout instead of the answer text, then a final {\"type\":\"result\"} line")
	fs.BoolVar(&opts.approve, "approve", false, "approve every effect confirmation without asking")
	fs.BoolVar(&opts.deny, "deny", false, "deny every effect confirmation without asking")
	fs.Func("max-turns", "stop the run after `n` provider turns, at least 1 (default 100)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("want a whole number of turns, at least 1")
		}
		opts.maxTurns = n
		return nil
	})
	fs.BoolVar(&opts.compact, "compact", false, "summarize the continued session (--session or --last) now instead of prompting it: the next prompt sees the summary in place of the conversation")
	fs.StringVar(&opts.sessionID, "session", "", "continue the session with this `id` (or an unambiguous prefix of it), in the directory it started in")
	fs.BoolVar(&opts.last, "last", false, "continue the most recently updated session started in the working directory")
	fs.BoolVar(&opts.ephemeral, "ephemeral", false, "do not keep the session: it is written to a private temporary directory and removed when the run ends")
	cd := fs.String("cd", "", "run in `dir` instead of the current directory")
	fs.Func("image", fmt.Sprintf("attach the image `file` (PNG, JPEG, GIF or WebP, at most 20 MiB) to the prompt; repeatable, at most %d times", host.MaxImages), func(name string) error {
		if len(opts.images) == host.MaxImages {
			return fmt.Errorf("at most %d images", host.MaxImages)
		}
		im, err := readImage(e.cwd, name)
		if err != nil {
			return err
		}
		opts.images = append(opts.images, im)
		return host.CheckImages(opts.images)
	})
	output := ""
	fs.StringVar(&output, "o", "", "write the final answer (the run's last assistant message) to `file`, even when the run fails (then what it has, possibly nothing)")
	err := parseFlags(fs, args)
	if err != nil {
		return flags, opts, err
	}
	switch {
	case opts.compact && (opts.sessionID == "" && !opts.last || fs.NArg() != 0 || len(opts.images) > 0):
		return flags, opts, usageErrorf("--compact summarizes a continued session: pass --session ID or --last, and no prompt or --image")
	case opts.compact:
	case fs.NArg() != 1 || strings.TrimSpace(fs.Arg(0)) == "":
		return flags, opts, usageErrorf("exec needs exactly one prompt argument: %s", execUsage)
	case !utf8.ValidString(fs.Arg(0)):
		// Refused as on stdin: the session would record (and the model
		// see) U+FFFD in place of each invalid byte.
		return flags, opts, usageErrorf("the prompt argument is not valid UTF-8 text (set a UTF-8 locale, or pass the prompt on stdin with octet exec -)")
	default:
		opts.prompt = fs.Arg(0)
	}
	switch {
	case opts.approve && opts.deny:
		return flags, opts, usageErrorf("--approve conflicts with --deny; pass at most one")
	case opts.last && opts.sessionID != "":
		return flags, opts, usageErrorf("--last conflicts with --session; pass at most one")
	case opts.ephemeral && (opts.last || opts.sessionID != ""):
		return flags, opts, usageErrorf("--ephemeral starts a session that is not kept; it cannot continue one (drop --last or --session)")
	}
	if opts.dir, err = execDir(e.cwd, *cd); err != nil {
		return flags, opts, err
	}
	if opts.sessionID != "" && *cd != "" {
		return flags, opts, usageErrorf("--cd conflicts with --session: a continued session runs in the directory it started in")
	}
	if output != "" {
		if opts.output, err = outputPath(e.cwd, output); err != nil {
			return flags, opts, err
		}
	}
	if err := config.CheckFlags(flags, e.lookup); err != nil {
		return flags, opts, err
	}
	return flags, opts, nil
}

// readImage reads an --image file, relative to cwd: a regular file that
// host.NewImage takes (a PNG, JPEG, GIF or WebP image, recognized by its
// bytes, of at most host.MaxImageBytes).
func readImage(cwd, name string) (provider.Image, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return provider.Image{}, pathError(err, "file")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return provider.Image{}, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, host.MaxImageBytes+1))
	if err != nil {
		return provider.Image{}, err
	}
	return host.NewImage(data, "")
}

// execDir resolves --cd against the process's directory cwd: it must be
// an existing directory.
func execDir(cwd, cd string) (string, error) {
	if cd == "" {
		return filepath.Clean(cwd), nil
	}
	dir := cd
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cwd, dir)
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return "", usageErrorf("--cd %s: %v", visible(cd), pathError(err, "directory"))
	case !fi.IsDir():
		return "", usageErrorf("--cd %s: not a directory", visible(cd))
	}
	return filepath.Clean(dir), nil
}

// outputPath resolves -o against cwd: its directory must exist and the
// path must not be a directory, so a run is never paid for only to find
// its answer cannot be written.
func outputPath(cwd, name string) (string, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "", usageErrorf("-o %s: is a directory; name a file", visible(name))
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return "", usageErrorf("-o %s: its directory %s does not exist", visible(name), visible(filepath.Dir(path)))
	}
	return path, nil
}

// pathError is err without the path the message already names; a path
// that does not exist is "no such " what (a file, a directory).
func pathError(err error, what string) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such " + what)
		}
		return pe.Err
	}
	return err
}

// writeAnswer writes the final answer to path (created, or truncated).
func writeAnswer(path, answer string) error {
	if answer != "" && !strings.HasSuffix(answer, "\n") {
		answer += "\n"
	}
	return os.WriteFile(path, []byte(answer), 0o666)
}

// lastSession returns the id of the most recently updated session in dir
// that started in ws.
func lastSession(dir, ws string) (string, error) {
	infos, err := session.List(dir)
	for _, in := range infos { // most recently updated first
		if filepath.Clean(in.Cwd) == ws {
			return in.ID, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("find the last session: %w", err)
	}
	return "", usageErrorf("--last: no session started in %s (octet sessions list shows the sessions and their directories)", visible(ws))
}

// readPrompt reads the whole prompt from in (octet exec -).
func readPrompt(in io.Reader) (string, error) {
	b, err := readStdin(in, "the prompt on stdin")
	switch {
	case err != nil:
		return "", err
	case strings.TrimSpace(string(b)) == "":
		return "", usageErrorf("the prompt on stdin is empty (octet exec - reads the prompt from stdin until end of file)")
	}
	return string(b), nil
}

// readStdin reads all of in: at most maxStdinPrompt bytes of UTF-8 text.
func readStdin(in io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(in, maxStdinPrompt+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", what, err)
	case len(b) > maxStdinPrompt:
		return nil, usageErrorf("%s is larger than %d bytes", what, maxStdinPrompt)
	case !utf8.Valid(b):
		return nil, usageErrorf("%s is not valid UTF-8 text", what)
	}
	return b, nil
}

// readStdinBlock reads stdin (a pipe or a file) to append it to a prompt
// argument as a <stdin> context block, as `codex exec` does; "" when it is
// empty. A pipe nobody closes would wait for ever, so after a moment it
// says on notes what it waits for.
func readStdinBlock(ctx context.Context, in io.Reader, notes io.Writer) (string, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := readStdin(in, "stdin (appended to the prompt)")
		done <- read{b, err}
	}()
	timer := time.NewTimer(stdinWaitNotice)
	defer timer.Stop()
	var r read
	select {
	case r = <-done:
	case <-timer.C:
		fmt.Fprintln(notes, "octet: waiting for stdin to end: it is appended to the prompt (run with </dev/null to leave it out)")
		select {
		case r = <-done:
		case <-ctx.Done():
			return "", &exitError{code: exitCancelled, err: errors.New("cancelled while reading stdin")}
		}
	case <-ctx.Done():
		return "", &exitError{code: exitCancelled, err: errors.New("cancelled while reading stdin")}
	}
	if r.err != nil || strings.TrimSpace(string(r.b)) == "" {
		return "", r.err
	}
	return "\n\n<stdin>\n" + strings.TrimSuffix(string(r.b), "\n") + "\n</stdin>", nil
}

// openSession opens session id in dir for appending.
func openSession(dir, id string) (*session.Session, error) {
	path, err := resolveSession(dir, id)
	if err != nil {
		return nil, err
	}
	s, err := session.Open(path)
	if err != nil {
		id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		if advice := session.WriteFailureAdvice(err); advice != "" {
			return nil, fmt.Errorf("open session %s for writing (%s): %w", id, advice, err)
		}
		return nil, readError("open session "+id, err)
	}
	return s, nil
}

// execResult is how an exec run ended: the run's result, its final
// answer (the text of its last assistant message, from the session) and
// its last usage subtotal (nil: none).
type execResult struct {
	agent.RunResult
	answer string
	usage  *agent.Usage
}

// prompting starts a run of prompt (with images) on an agent: drive's
// usual start.
func prompting(ctx context.Context, prompt string, images []provider.Image) func(*agent.Agent) (*agent.Run, error) {
	return func(a *agent.Agent) (*agent.Run, error) {
		return a.Prompt(ctx, prompt, agent.PromptOptions{Images: images})
	}
}

// drive runs one run (start: a prompt, or a compaction) on a fresh agent for sess and renders its events
// (text, or JSON lines with asJSON) until the run has settled. The loop
// that renders is the only writer of the terminal: ap's notices and
// prompts are written by it, after the events that came before them.
func drive(ctx context.Context, st *stack.Stack, sess *session.Session, ap *termApprover, start func(*agent.Agent) (*agent.Run, error), asJSON bool, e env) (execResult, error) {
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
		// A terminal or a pipe gets answer text as it arrives; a file
		// only committed text.
		tr := newTextRenderer(e.stdout, e.stderr, e.stdoutIsTerminal || e.stdoutIsPipe)
		tr.dim = e.stderrIsTerminal
		tr.result = func(callID string) *session.ToolResult { return findResult(sess, callID) }
		render, endLine = tr.event, tr.endLine
	}
	children.endLine = func() { endLine() }
	st.Delegation = children.install
	// A continued session keeps the effect policy it recorded (when the
	// launch policy still allows it), as it would in an editor.
	a, release, err := st.NewAgent(sess, ap, nil, host.NewRuleBook(sess, st.Logger()).RecordedPolicy())
	if err != nil {
		return execResult{}, fmt.Errorf("start agent: %w", err)
	}
	defer release()
	if err := st.SettleSelection(a, sess); err != nil {
		return execResult{}, fmt.Errorf("model and reasoning selection: %w", err)
	}
	if err := checkListedTools(st.Config(), st.MCPServers(), st.Logger()); err != nil {
		return execResult{}, err
	}
	if p := host.PlanOf(sess.Branch()); p != nil {
		// A continued session's plan, before its run (runId "" in --json).
		render(&agent.PlanUpdate{Explanation: p.Explanation, Plan: p.Steps})
	}
	run, err := start(a)
	if err != nil {
		return execResult{}, fmt.Errorf("start run: %w", err)
	}
	if jr != nil {
		jr.runID = run.ID()
	}
	var res execResult
	ownTerminal(run.Events(), term, func(ev agent.Event) {
		if u, ok := ev.(*agent.Usage); ok {
			res.usage = u
		}
		render(ev)
	}, endLine)
	res.RunResult = run.Wait()
	res.answer = host.FinalAnswer(sess, res.RunID)
	if jr != nil && jr.err != nil {
		st.Logger().Warn(fmt.Sprintf("could not write every event to stdout: %v", jr.err))
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

// outcomeError maps a run result to the documented exit status; sid,
// when set, is the kept session a run stopped at its turn limit can be
// continued in.
func outcomeError(res agent.RunResult, cfg *config.Config, sid string) error {
	switch res.Outcome {
	case agent.OutcomeCompleted:
		return nil
	case agent.OutcomeCancelled:
		return &exitError{code: exitCancelled, err: fmt.Errorf("run cancelled")}
	case agent.OutcomeMaxTurns:
		msg := "run stopped at its turn limit (max_turns)"
		if sid != "" {
			msg += fmt.Sprintf(": to go on, octet exec --session %s \"continue\" (--max-turns N for a larger limit)", sid)
		}
		return &exitError{code: exitMaxTurns, err: errors.New(msg)}
	}
	msg := "run failed"
	if res.Err != nil {
		msg += ": " + res.Err.Error()
	}
	if hint := stack.ProviderHint(res.Err, cfg); hint != "" {
		msg += "\n  " + hint
	}
	if advice := session.WriteFailureAdvice(res.Err); advice != "" {
		msg += "\n  " + advice
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("%s", msg)}
}
