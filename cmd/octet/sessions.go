package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/session"
)

const sessionsUsage = "octet sessions list | show <id> | export <id>"

// maxShownText bounds each text block `sessions show` prints.
const maxShownText = 4 << 10

func runSessions(_ context.Context, args []string, e env) error {
	fs := newFlagSet("sessions", sessionsUsage, e.stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		fs.Usage()
		return &exitError{code: exitUsage}
	}
	home, err := config.HomeDir(e.lookup)
	if err != nil {
		return err
	}
	dir := session.Dir(home)
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return usageErrorf("usage: octet sessions list")
		}
		return listSessions(dir, e.stdout)
	case "show", "export":
		if len(args) != 2 {
			return usageErrorf("usage: octet sessions %s <id>", args[0])
		}
		path, err := sessionPath(dir, args[1])
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no session %q in %s (octet sessions list shows the sessions there; OCTET_HOME selects another home)", args[1], dir)
		}
		if args[0] == "export" {
			return session.Export(path, e.stdout)
		}
		return showSession(path, e.stdout)
	default:
		return usageErrorf("unknown sessions command %q; usage: %s", args[0], sessionsUsage)
	}
}

// sessionPath maps an id to its file, refusing anything path-like.
func sessionPath(dir, id string) (string, error) {
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") || strings.ContainsAny(id, `/\`) {
		return "", usageErrorf("invalid session id %q (see octet sessions list)", id)
	}
	return filepath.Join(dir, strings.TrimSuffix(id, ".jsonl")+".jsonl"), nil
}

func listSessions(dir string, out io.Writer) error {
	infos, err := session.List(dir)
	if len(infos) == 0 && err == nil {
		fmt.Fprintf(out, "no sessions in %s\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tTITLE\tCWD\tUSAGE")
	for _, in := range infos {
		usage := "known"
		if in.UsageUncertain {
			usage = "uncertain"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.ID, in.Updated.Local().Format(time.DateTime),
			neutralize(oneLine(in.Title, 60)), neutralize(in.Cwd), usage)
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("some sessions could not be read: %w", err)
	}
	return nil
}

func showSession(path string, out io.Writer) error {
	s, err := session.Inspect(path)
	if err != nil {
		return fmt.Errorf("show session: %w", err)
	}
	defer s.Close()
	h := s.Header()
	fmt.Fprintf(out, "session %s\n  created %s\n  cwd     %s\n  file    %s\n", h.ID, h.Created.Local().Format(time.DateTime), neutralize(h.Cwd), path)
	if h.Title != "" {
		fmt.Fprintf(out, "  title   %s\n", neutralize(oneLine(h.Title, 200)))
	}
	for _, en := range s.Branch() {
		showEntry(out, en)
	}
	t := s.Totals()
	state := "complete"
	if t.Uncertain {
		state = "a known subtotal (some usage is unknown)"
	}
	fmt.Fprintf(out, "\nusage: %d requests, input %d (cached %d), output %d (reasoning %d) — %s\n",
		t.Requests, t.Known.Input, t.Known.CachedInput, t.Known.Output, t.Known.Reasoning, state)
	showUncertainty(out, s, t)
	for _, c := range s.Checkpoints() {
		line := fmt.Sprintf("run %s: %s", c.RunID, c.Outcome)
		if c.Error != "" {
			line += " (" + oneLine(c.Error, 200) + ")"
		}
		fmt.Fprintln(out, neutralize(line))
	}
	if n := s.TornBytes(); n > 0 {
		fmt.Fprintf(out, "note: the file ends with %d bytes of an unfinished record (repaired when the session is next opened for writing)\n", n)
	}
	return nil
}

// showUncertainty prints why usage is uncertain and the recovered output
// (partial output of replaced attempts), each in its own place after the
// conversation.
func showUncertainty(out io.Writer, s *session.Session, t session.Totals) {
	if t.Uncertain {
		fmt.Fprintln(out, neutralize("usage uncertain since "+agent.DescribeUncertainty(t.Cause)))
		if t.UnsettledDispatches > 0 {
			fmt.Fprintf(out, "  %d request(s) dispatched and never settled (recorded when the session is next opened for writing)\n", t.UnsettledDispatches)
		}
	}
	rec := s.RecoveredOutputs()
	if len(rec) == 0 {
		return
	}
	fmt.Fprintln(out, "\nrecovered output (partial output of interrupted attempts that were replaced; not part of the conversation):")
	for _, o := range rec {
		fmt.Fprintf(out, "  [run %s, attempt %d, %s] %s\n", neutralize(o.RunID), o.Attempt, neutralize(o.Channel), neutralize(clip(o.Text, maxShownText)))
	}
}

func showEntry(out io.Writer, en session.Entry) {
	switch en.Type {
	case session.EntryUser, session.EntrySteering, session.EntryFollowUp:
		fmt.Fprintf(out, "\n[%s] %s\n", en.Type, neutralize(clip(en.Text, maxShownText)))
	case session.EntryAssistant:
		for _, it := range en.Items {
			switch it.Type {
			case session.ItemText:
				fmt.Fprintf(out, "\n[assistant] %s\n", neutralize(clip(it.Text, maxShownText)))
			case session.ItemFunctionCall:
				fmt.Fprintf(out, "[call %s] %s %s\n", it.CallID, it.Name, neutralize(oneLine(it.Arguments, 300)))
			}
		}
	case session.EntryToolResult:
		if r := en.Result; r != nil {
			status := "ok"
			if r.IsError {
				status = "error"
			}
			fmt.Fprintf(out, "[result %s %s] %s\n", r.CallID, status, neutralize(oneLine(r.Text, 300)))
		}
	case session.EntryCompaction:
		fmt.Fprintln(out, "\n[compaction]")
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func oneLine(s string, n int) string { return clip(strings.Join(strings.Fields(s), " "), n) }
