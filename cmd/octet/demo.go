package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host/stack"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

//go:embed testdata/demo
var demoFiles embed.FS

const demoUsage = "octet demo"

// runDemo runs the real stack — scripted Responses server on loopback
// HTTP, real tools, broker, agent loop and session file — on a temporary
// copy of the demo workspace. It uses built-in defaults (not your config)
// with the controlled policy so that the edit asks for approval.
func runDemo(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("demo", demoUsage, e.stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("demo takes no arguments")
	}
	start := time.Now()
	log := newLogger(e.stderr, e.lookup)
	home, tempHome, err := demoHome(e)
	if err != nil {
		return err
	}
	if tempHome {
		defer os.RemoveAll(home)
	}
	// The workspace is a copy made for the demo: it goes when the demo
	// ends (deferred first, so it runs after everything using it closed).
	ws, err := os.MkdirTemp("", "octet-demo-workspace-")
	if err != nil {
		return fmt.Errorf("demo workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	if err := copyDemoWorkspace(ws); err != nil {
		return err
	}
	srv := providertest.New(nil)
	defer srv.Close()
	srv.Enqueue(demoScript()...)

	cfg := demoConfig(home, ws, srv.URL())
	st, err := stack.New(cfg, config.Secret{}, ws, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// One stream for the demo: answer, tool activity and approvals stay in
	// order on the terminal. A reader that stops early (octet demo | head)
	// cancels the run, which settles, and the temporary copies go.
	out, ctx, cancel := watchOutput(ctx, e.stdout)
	defer cancel(nil)
	e.stdout, e.stderr = out, out
	ap := &termApprover{mode: askTerminal, open: e.tty, notice: e.stdout}
	if !e.stdinIsTerminal {
		ap.mode, ap.why = approveAll, "stdin is not a terminal, so the demo approves by itself"
	}
	sess, err := session.Create(cfg.SessionsDir(), session.Header{Cwd: ws, Title: "octet demo"})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	defer sess.Close()

	fmt.Fprintf(e.stdout, "octet demo: the real runtime against a scripted model on %s (no network, no API key)\n", srv.URL())
	fmt.Fprintf(e.stdout, "workspace: %s (a temporary copy of the demo project)\n", ws)
	fmt.Fprintf(e.stdout, "policy:    %s — reads run freely, edits need your approval\n", cfg.EffectPolicy.Value)
	if ap.mode == approveAll {
		fmt.Fprintf(e.stdout, "approvals: automatic (%s)\n", ap.why)
	}
	fmt.Fprintf(e.stdout, "\n> %s\n\n", demoPrompt)

	res, err := drive(ctx, st, sess, ap, prompting(ctx, demoPrompt, nil), false, e)
	if werr := out.failed(); werr != nil {
		where := "octet sessions show " + sess.Header().ID + " shows it"
		if tempHome {
			where = "the demo's temporary home and workspace copy are removed"
		}
		return outputError(werr, where)
	}
	if err != nil {
		return err
	}
	after, _ := os.ReadFile(filepath.Join(ws, "greet.go"))
	fmt.Fprintf(e.stdout, "\n── result: run %s in %.1fs\n", res.Outcome, time.Since(start).Seconds())
	fmt.Fprintf(e.stdout, "greet.go:  %s\n", greetingLine(after))
	if tempHome {
		fmt.Fprintf(e.stdout, "cleanup:   the demo's temporary home and workspace copy are removed now; run it as OCTET_HOME=DIR octet demo to keep its session for octet sessions show\n")
	} else {
		fmt.Fprintf(e.stdout, "session:   %s\n", sess.Path())
		fmt.Fprintf(e.stdout, "inspect:   octet sessions show %s   (the workspace copy was temporary and is removed; octet sessions delete %s removes the session)\n", sess.Header().ID, sess.Header().ID)
	}
	if res.Outcome != agent.OutcomeCompleted {
		return outcomeError(res.RunResult, cfg, "")
	}
	return nil
}

// demoHome is $OCTET_HOME when set, else a fresh temporary home (temp
// is true: the demo removes it when it ends).
func demoHome(e env) (home string, temp bool, err error) {
	if h, ok := e.lookup("OCTET_HOME"); ok && h != "" {
		home, err = filepath.Abs(h)
		return home, false, err
	}
	if home, err = os.MkdirTemp("", "octet-demo-home-"); err != nil {
		return "", false, fmt.Errorf("demo home: %w", err)
	}
	return home, true, nil
}

// demoConfig is the built-in defaults with the controlled policy and the
// scripted server as the provider.
func demoConfig(home, ws, baseURL string) *config.Config {
	c := config.Defaults()
	c.Home, c.Workspace = home, ws
	c.BaseURL = config.Setting[string]{Value: baseURL, Source: config.SourceFlag}
	c.EffectPolicy = config.Setting[config.EffectPolicy]{Value: config.Controlled, Source: config.SourceFlag}
	c.AllowExternalPaths = config.Setting[bool]{Value: false, Source: config.SourceFlag}
	// The scripted server plays the Codex route: local function tools over
	// Responses, so the agent's recovery envelope applies.
	c.RuntimeProfile = config.Setting[string]{Value: "codex", Source: config.SourceFlag}
	return &c
}

func copyDemoWorkspace(dst string) error {
	const root = "testdata/demo"
	return fs.WalkDir(demoFiles, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := demoFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// greetingLine picks the return line of greeting() for the summary.
func greetingLine(src []byte) string {
	for l := range strings.Lines(string(src)) {
		if strings.Contains(l, "return \"") {
			return strings.TrimSpace(l)
		}
	}
	return "(not found)"
}
