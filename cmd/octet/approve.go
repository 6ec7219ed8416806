package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/octet-agent/octet/tools"
)

// approvalMode is how the CLI answers effect confirmations.
type approvalMode int

const (
	askTerminal approvalMode = iota // ask on /dev/tty; deny when there is none
	approveAll                      // --approve (and the demo without a terminal)
	denyAll                         // --deny
)

// termApprover is the CLI's tools.Approver: it prints the exact effect and
// asks on the terminal, or decides by mode. Prompts go to the terminal (or
// the notice writer), never to stdout, which carries the answer.
type termApprover struct {
	mode   approvalMode
	open   func() (io.ReadWriteCloser, error)
	notice io.Writer // where decisions are reported (stderr)
	why    string    // why approveAll is on, e.g. "stdin is not a terminal"
	// term, when set, owns the terminal: every notice and prompt is
	// written by its goroutine, after the run's earlier events.
	term *terminal
	mu   sync.Mutex
}

var _ tools.Approver = (*termApprover)(nil)

// Confirm implements tools.Approver. The answer always echoes req.Digest:
// the person saw exactly this request.
func (a *termApprover) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ap := tools.Approval{Approved: false, Digest: req.Digest}
	var err error
	if terr := a.term.do(ctx, func() { ap, err = a.decide(ctx, req) }); terr != nil {
		return ap, terr
	}
	return ap, err
}

// decide prints req and decides it by mode, asking on the terminal when
// the mode says so.
func (a *termApprover) decide(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	switch a.mode {
	case approveAll:
		fmt.Fprintf(a.notice, "%s\n  approved automatically (%s)\n", describe(req), a.why)
		return tools.Approval{Approved: true, Digest: req.Digest}, nil
	case denyAll:
		fmt.Fprintf(a.notice, "%s\n  denied (--deny)\n", describe(req))
		return tools.Approval{Approved: false, Digest: req.Digest}, nil
	}
	var tty io.ReadWriteCloser
	var err error
	if a.open != nil {
		tty, err = a.open()
	}
	if a.open == nil || err != nil {
		fmt.Fprintf(a.notice, "%s\n  denied: no terminal to ask (pass --approve or --deny to decide without one)\n", describe(req))
		return tools.Approval{Approved: false, Digest: req.Digest}, nil
	}
	defer tty.Close()
	ok, err := askYesNo(ctx, tty, describe(req)+"\nApprove? [y/N] ")
	if err != nil {
		return tools.Approval{Approved: false, Digest: req.Digest}, err
	}
	return tools.Approval{Approved: ok, Digest: req.Digest}, nil
}

// describe renders one request for a person: title, detail, whole diff.
func describe(req tools.ConfirmRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "── approval needed: %s (%s)\n", visible(req.Title), req.Intent.Effect)
	if req.Detail != "" {
		fmt.Fprintf(&b, "%s\n", visible(req.Detail))
	}
	if d := req.Diff; d != "" {
		// Whole: the broker already refused what cannot be shown whole
		// (an approval never shows less than what runs).
		b.WriteString(visible(d))
		if !strings.HasSuffix(d, "\n") {
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "   digest %s", shortDigest(req.Digest))
	return b.String()
}

func shortDigest(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	return d
}

// visible is how the CLI prints text a model or a repository controls
// (titles, tool names and arguments, output, error text): every control,
// invalid byte and invisible or reordering character made visible
// (tools.VisibleText: ESC as ^[, U+202E as ⟨U+202E⟩), so it can neither
// drive the terminal nor hide what is shown.
func visible(s string) string { return tools.VisibleText(s) }

// askYesNo writes prompt to tty and reads one line; only y/yes approves.
// It returns when ctx ends (closing tty unblocks the read).
func askYesNo(ctx context.Context, tty io.ReadWriteCloser, prompt string) (bool, error) {
	if _, err := io.WriteString(tty, prompt); err != nil {
		return false, fmt.Errorf("write approval prompt: %w", err)
	}
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(tty).ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		tty.Close()
		<-ch
		return false, ctx.Err()
	case a := <-ch:
		if a.err != nil && a.line == "" {
			return false, nil // EOF: no answer is a denial
		}
		switch strings.ToLower(strings.TrimSpace(a.line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	}
}
