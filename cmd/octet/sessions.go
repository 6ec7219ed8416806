package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/session"
)

const sessionsUsage = "octet sessions list | show <id> | export <id> | diff <id> | rewind <id> <entry>"

// maxShownText bounds each text block `sessions show` prints.
const maxShownText = 4 << 10

func runSessions(ctx context.Context, args []string, e env) error {
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
		path, err := resolveReadable(dir, args[1])
		if err != nil {
			return err
		}
		if args[0] == "export" {
			return session.Export(path, e.stdout)
		}
		return showSession(path, e.stdout)
	case "diff":
		return sessionsDiff(home, dir, args[1:], e)
	case "rewind":
		return sessionsRewind(ctx, home, dir, args[1:], e)
	default:
		return usageErrorf("unknown sessions command %q; usage: %s", args[0], sessionsUsage)
	}
}

// maxCandidates bounds the sessions an ambiguous-prefix error lists.
const maxCandidates = 10

// resolveSession maps a session id, or an unambiguous prefix of one, to
// its file in dir. Anything path-like, an unknown id and an ambiguous
// prefix are usage errors that say how to find the right id.
func resolveSession(dir, id string) (string, error) {
	id = strings.TrimSuffix(id, ".jsonl")
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") || strings.ContainsAny(id, `/\`) {
		return "", usageErrorf("invalid session id %q (octet sessions list shows the ids)", id)
	}
	path := filepath.Join(dir, id+".jsonl")
	if _, err := os.Lstat(path); err == nil {
		return path, nil
	}
	ids, err := sessionIDs(dir)
	if err != nil {
		return "", err
	}
	var matches []string
	for _, cand := range ids {
		if strings.HasPrefix(cand, id) {
			matches = append(matches, cand)
		}
	}
	switch len(matches) {
	case 0:
		return "", usageErrorf("no session %q in %s (octet sessions list shows the sessions there; OCTET_HOME selects another home)", id, dir)
	case 1:
		return filepath.Join(dir, matches[0]+".jsonl"), nil
	}
	shown := matches[:min(len(matches), maxCandidates)]
	more := ""
	if n := len(matches) - len(shown); n > 0 {
		more = fmt.Sprintf("\n  … and %d more", n)
	}
	return "", usageErrorf("session id prefix %q is ambiguous: it matches %d sessions; give more of the id:\n  %s%s",
		id, len(matches), strings.Join(shown, "\n  "), more)
}

// resolveReadable is resolveSession for commands that only read a
// session: an id no session in dir has may also name a delegated child's
// session (kept in its team's directory, under dir/teams).
func resolveReadable(dir, id string) (string, error) {
	path, err := resolveSession(dir, id)
	if err == nil {
		return path, nil
	}
	if cs, ok, ferr := team.FindChildSession(filepath.Join(dir, "teams"), strings.TrimSuffix(id, ".jsonl")); ferr == nil && ok {
		return cs.Path, nil
	}
	return "", err
}

// sessionIDs lists the ids of the session files in dir, sorted.
func sessionIDs(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read sessions directory: %w", err)
	}
	var ids []string
	for _, de := range des {
		name := de.Name()
		if id, ok := strings.CutSuffix(name, ".jsonl"); ok && !strings.HasPrefix(name, ".") && de.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func listSessions(dir string, out io.Writer) error {
	infos, err := session.List(dir)
	if len(infos) == 0 && err == nil {
		fmt.Fprintf(out, "no sessions in %s\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tTITLE\tCWD\tUSAGE\tCOST")
	for _, in := range infos {
		usage := "known"
		if in.UsageUncertain {
			usage = "uncertain"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Updated.Local().Format(time.DateTime),
			neutralize(oneLine(in.Title, 60)), neutralize(in.Cwd), usage, listedCost(in))
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
	if title := s.Title(); title != "" {
		fmt.Fprintf(out, "  title   %s\n", neutralize(oneLine(title, 200)))
	}
	if h.ForkOf != "" {
		fmt.Fprintf(out, "  fork of %s at entry %s\n", neutralize(h.ForkOf), neutralize(h.ForkEntry))
	}
	showChildren(out, path, h.ID)
	for _, en := range s.Branch() {
		showEntry(out, en)
	}
	t := s.Totals()
	state := "complete"
	if t.Uncertain {
		state = "a known subtotal (some usage is unknown)"
	}
	fmt.Fprintf(out, "\nusage: %d requests, input %d (cached %d), output %d (reasoning %d), cost %s — %s\n",
		t.Requests, t.Known.Input, t.Known.CachedInput, t.Known.Output, t.Known.Reasoning, shownCost(t), state)
	showUncertainty(out, s, t)
	for _, c := range s.Checkpoints() {
		line := fmt.Sprintf("run %s: %s", c.RunID, c.Outcome)
		if c.Error != "" {
			line += " (" + oneLine(c.Error, 200) + ")"
		}
		fmt.Fprintln(out, neutralize(line))
	}
	for _, id := range s.OpenRuns() {
		fmt.Fprintln(out, neutralize(fmt.Sprintf("run %s: no checkpoint yet: it is still running, or octet stopped or could not write the session before it ended (the next writable open records its end)", id)))
	}
	if n := s.TornBytes(); n > 0 {
		fmt.Fprintf(out, "note: the file ends with %d bytes of an unfinished record (repaired when the session is next opened for writing)\n", n)
	}
	return nil
}

// showChildren lists the delegated child sessions of the session id at
// path (octet sessions show takes their ids too), or, for a child, whose
// child it is.
func showChildren(out io.Writer, path, id string) {
	dir := filepath.Dir(path)
	if filepath.Base(filepath.Dir(dir)) == "teams" {
		if cs, ok, err := team.FindChildSession(filepath.Dir(dir), id); err == nil && ok {
			fmt.Fprintf(out, "  child   %s of session %s (%s)\n", neutralize(cs.AgentPath), neutralize(cs.ParentSessionID), neutralize(string(cs.Status)))
		}
		return
	}
	children, _ := team.ChildSessions(filepath.Join(dir, "teams"), id)
	for _, c := range children {
		fmt.Fprintf(out, "  child   %s: session %s (%s)\n", neutralize(c.AgentPath), neutralize(c.SessionID), neutralize(string(c.Status)))
	}
}

// listedCost is a session's known cost for the listing, from its listing
// summary (no session file is read in full): "$0.02", "-" for no known
// usage, "unpriced" when its usage has no price, "≥$0.02" for a known
// subtotal.
func listedCost(in session.Info) string {
	if in.UsageRecords == 0 {
		return "-"
	}
	c, ok := knownCost(in.Known)
	switch {
	case !ok:
		return "unpriced"
	case in.UsageUncertain:
		return "≥" + c
	}
	return c
}

// knownCost formats the known cost of a session's totals; ok is false when
// its usage was recorded without any cost (no price for the model).
func knownCost(k session.Usage) (string, bool) {
	if k.CostPicodollars == 0 && k.Input+k.Output > 0 {
		return "", false
	}
	return agent.Picodollars(k.CostPicodollars).String(), true
}

// shownCost is knownCost for sessions show.
func shownCost(t session.Totals) string {
	if c, ok := knownCost(t.Known); ok {
		return c
	}
	return "unknown (no price for the model)"
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
				if why := commandStatus(r.Details); why != "" {
					status += ", " + why
				}
			}
			fmt.Fprintf(out, "[result %s %s] %s\n", r.CallID, status, neutralize(oneLine(r.Text, 300)))
		}
	case session.EntryCompaction:
		fmt.Fprintln(out, "\n[compaction]")
	case session.EntryRewind:
		fmt.Fprintf(out, "\n[rewind %s] %s\n", en.ID, neutralize(oneLine(en.Text, 300)))
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
