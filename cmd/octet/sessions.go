package main

import (
	"context"
	"errors"
	"flag"
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

// maxShownText bounds each text block `sessions show` prints.
const maxShownText = 4 << 10

// sessionsGroup is `octet sessions`.
var sessionsGroup = group{name: "sessions", subs: []subcommand{
	{"list", "octet sessions list", sessionsList},
	{"show", "octet sessions show <id>", sessionsShowExport("show")},
	{"export", "octet sessions export <id>", sessionsShowExport("export")},
	{"diff", diffUsage, sessionsDiff},
	{"rewind", rewindUsage, sessionsRewind},
	{"delete", deleteUsage, sessionsDelete},
	{"prune", pruneUsage, sessionsPrune},
}}

// sessionsDir returns $OCTET_HOME and its sessions directory.
func sessionsDir(e env) (home, dir string, err error) {
	home, err = config.HomeDir(e.lookup)
	if err != nil {
		return "", "", err
	}
	return home, session.Dir(home), nil
}

// parseSub parses a subcommand's flags (anywhere among its arguments)
// and checks it got n positional arguments (n < 0: at least one).
func parseSub(fs *flag.FlagSet, synopsis string, args []string, n int) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if n >= 0 && len(pos) != n || n < 0 && len(pos) == 0 {
		return nil, usageErrorf("usage: %s", synopsis)
	}
	return pos, nil
}

func sessionsList(_ context.Context, args []string, e env) error {
	const synopsis = "octet sessions list"
	if _, err := parseSub(newFlagSet("sessions list", synopsis, e.stdout), synopsis, args, 0); err != nil {
		return err
	}
	_, dir, err := sessionsDir(e)
	if err != nil {
		return err
	}
	return listSessions(dir, e.stdout)
}

// sessionsShowExport is `sessions show` or `sessions export`.
func sessionsShowExport(name string) func(context.Context, []string, env) error {
	return func(_ context.Context, args []string, e env) error {
		synopsis := "octet sessions " + name + " <id>"
		pos, err := parseSub(newFlagSet("sessions "+name, synopsis, e.stdout), synopsis, args, 1)
		if err != nil {
			return err
		}
		_, dir, err := sessionsDir(e)
		if err != nil {
			return err
		}
		path, err := resolveReadable(dir, pos[0])
		if err != nil {
			return err
		}
		if name == "export" {
			err := session.Export(path, e.stdout)
			if advice := session.ReadFailureAdvice(err); advice != "" {
				return fmt.Errorf("%w (%s)", err, advice)
			}
			return err
		}
		return showSession(path, e.stdout)
	}
}

// readError is err, an error of what (such as "show session") reading
// a session, with what to do about it when the session package knows (a
// record damaged before the file's end, a newer format).
func readError(what string, err error) error {
	if advice := session.ReadFailureAdvice(err); advice != "" {
		return fmt.Errorf("%s (%s): %w", what, advice, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// maxCandidates bounds the ids an ambiguous-prefix error lists.
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
	full, err := matchPrefix(id, ids, "session", "sessions",
		fmt.Sprintf("no session %q in %s (octet sessions list shows the sessions there; OCTET_HOME selects another home)", id, dir))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, full+".jsonl"), nil
}

// matchPrefix returns the one id of ids that is prefix or starts with it.
// No match is a usage error saying none; several, one listing them (at
// most maxCandidates) and asking for more of the id.
func matchPrefix(prefix string, ids []string, kind, kinds, none string) (string, error) {
	var matches []string
	for _, cand := range ids {
		if cand == prefix {
			return cand, nil
		}
		if strings.HasPrefix(cand, prefix) {
			matches = append(matches, cand)
		}
	}
	switch len(matches) {
	case 0:
		return "", usageErrorf("%s", none)
	case 1:
		return matches[0], nil
	}
	shown := matches[:min(len(matches), maxCandidates)]
	more := ""
	if n := len(matches) - len(shown); n > 0 {
		more = fmt.Sprintf("\n  … and %d more", n)
	}
	return "", usageErrorf("%s id prefix %q is ambiguous: it matches %d %s; give more of the id:\n  %s%s",
		kind, visible(prefix), len(matches), kinds, visible(strings.Join(shown, "\n  ")), more)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", visible(in.ID), in.Updated.Local().Format(time.DateTime),
			visible(oneLine(in.Title, 60)), visible(in.Cwd), usage, listedCost(in))
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
		return readError("show session", err)
	}
	defer s.Close()
	h := s.Header()
	fmt.Fprintf(out, "session %s\n  created %s\n  cwd     %s\n  file    %s\n", visible(h.ID), h.Created.Local().Format(time.DateTime), visible(h.Cwd), visible(path))
	if title := s.Title(); title != "" {
		fmt.Fprintf(out, "  title   %s\n", visible(oneLine(title, 200)))
	}
	if h.ForkOf != "" {
		fmt.Fprintf(out, "  fork of %s at entry %s\n", visible(h.ForkOf), visible(h.ForkEntry))
	}
	showChildren(out, path, h.ID)
	idLen := shortIDLen(s.EntryIDs())
	fmt.Fprintf(out, "\nentry ids are in the first column (octet sessions rewind <id> <entry> takes one, or any unambiguous prefix)\n")
	for _, en := range s.Branch() {
		showEntry(out, en, idLen)
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
		fmt.Fprintln(out, visible(line))
	}
	for _, id := range s.OpenRuns() {
		fmt.Fprintln(out, visible(fmt.Sprintf("run %s: no checkpoint yet: it is still running, or octet stopped or could not write the session before it ended (the next writable open records its end)", id)))
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
			fmt.Fprintf(out, "  child   %s of session %s (%s)\n", visible(cs.AgentPath), visible(cs.ParentSessionID), visible(string(cs.Status)))
		}
		return
	}
	children, _ := team.ChildSessions(filepath.Join(dir, "teams"), id)
	for _, c := range children {
		fmt.Fprintf(out, "  child   %s: session %s (%s)\n", visible(c.AgentPath), visible(c.SessionID), visible(string(c.Status)))
	}
}

// listedCost is a session's known cost for the listing, from its listing
// summary (no session file is read in full): "$0.02", "-" for no known
// usage, "unpriced" when none of its usage has a price, "≥$0.02" for a
// known subtotal (uncertain, or some usage without a price). A price of
// 0 is a price: "$0".
func listedCost(in session.Info) string {
	if in.UsageRecords == 0 {
		return "-"
	}
	if in.UnpricedRecords == in.UsageRecords {
		return "unpriced"
	}
	c := agent.Picodollars(in.Known.CostPicodollars).String()
	if in.UsageUncertain || in.UnpricedRecords > 0 {
		return "≥" + c
	}
	return c
}

// shownCost is the known cost of a session's totals for sessions show.
func shownCost(t session.Totals) string {
	c := agent.Picodollars(t.Known.CostPicodollars).String()
	switch records := t.Requests + t.DelegatedRecords; {
	case t.Unpriced == 0:
		return c
	case t.Unpriced == records:
		return "unknown (no price for the model)"
	}
	return c + " for the usage with a price; some has none"
}

// showUncertainty prints why usage is uncertain and the recovered output
// (partial output of replaced attempts), each in its own place after the
// conversation.
func showUncertainty(out io.Writer, s *session.Session, t session.Totals) {
	if t.Uncertain {
		fmt.Fprintln(out, visible("usage uncertain since "+agent.DescribeUncertainty(t.Cause)))
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
		fmt.Fprintf(out, "  [run %s, attempt %d, %s] %s\n", visible(o.RunID), o.Attempt, visible(o.Channel), visible(clip(o.Text, maxShownText)))
	}
}

// minShownID is the shortest entry id prefix sessions show prints.
const minShownID = 8

// shortIDLen is the length at which every id in ids is told apart by its
// prefix, at least minShownID.
func shortIDLen(ids []string) int {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	n := minShownID
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		n = max(n, k+1)
	}
	return n
}

// showEntry prints one entry of the branch, its id (cut to idLen) first.
func showEntry(out io.Writer, en session.Entry, idLen int) {
	id := visible(en.ID)
	if len(id) > idLen {
		id = id[:idLen]
	}
	pad := strings.Repeat(" ", len(id))
	switch en.Type {
	case session.EntryUser, session.EntrySteering, session.EntryFollowUp:
		fmt.Fprintf(out, "\n%s [%s] %s\n", id, en.Type, visible(clip(en.Text, maxShownText)))
		showImages(out, pad, en.PromptImages())
	case session.EntryAssistant:
		lead := "\n" + id
		for _, it := range en.Items {
			switch it.Type {
			case session.ItemText:
				fmt.Fprintf(out, "%s [assistant] %s\n", lead, visible(clip(it.Text, maxShownText)))
			case session.ItemFunctionCall:
				if lead != pad {
					fmt.Fprintf(out, "%s [assistant]\n", lead)
				}
				fmt.Fprintf(out, "%s [call %s] %s %s\n", pad, visible(it.CallID), visible(it.Name), visible(oneLine(it.Arguments, 300)))
			default:
				continue
			}
			lead = pad
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
			fmt.Fprintf(out, "%s [result %s %s] %s\n", id, visible(r.CallID), status, visible(oneLine(r.Text, 300)))
			showImages(out, pad, r.ResultImages())
		}
	case session.EntryCompaction:
		fmt.Fprintf(out, "\n%s [compaction]\n", id)
	case session.EntryRewind:
		fmt.Fprintf(out, "\n%s [rewind] %s\n", id, visible(oneLine(en.Text, 300)))
	}
}

// showImages prints a line per image of a prompt or a tool result: its
// type, size and name in octet's image store.
func showImages(out io.Writer, pad string, imgs []session.Image) {
	for _, im := range imgs {
		fmt.Fprintf(out, "%s [image] %s, %d bytes, %s\n", pad, visible(im.MimeType), im.Bytes, visible(clip(im.SHA256, 12)))
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
