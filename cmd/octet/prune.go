package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
)

const (
	deleteUsage = "octet sessions delete <id>..."
	pruneUsage  = "octet sessions prune --older-than <age> [--failed] [--dry-run]"
)

// sessionsDelete is `octet sessions delete`: every id is resolved first,
// so a mistyped one deletes nothing.
func sessionsDelete(_ context.Context, args []string, e env) error {
	fs := newFlagSet("sessions delete", deleteUsage, e.stdout)
	pos, err := parseSub(fs, deleteUsage, args, -1)
	if err != nil {
		return err
	}
	_, dir, err := sessionsDir(e)
	if err != nil {
		return err
	}
	var paths []string
	for _, id := range pos {
		path, err := resolveSession(dir, id)
		if err != nil {
			return err
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	return removeSessions(dir, paths, e)
}

// sessionsPrune is `octet sessions prune`.
func sessionsPrune(_ context.Context, args []string, e env) error {
	fs := newFlagSet("sessions prune", pruneUsage, e.stdout)
	var age time.Duration
	fs.Func("older-than", "delete the sessions not updated for `age`: a number and a unit, s, m, h, d (days) or w (weeks), such as 30d", func(s string) error {
		d, err := parseAge(s)
		age = d
		return err
	})
	failed := fs.Bool("failed", false, "only the sessions whose last run did not complete (it failed, was cancelled or stopped at its turn limit) or that recorded no run")
	dry := fs.Bool("dry-run", false, "list what would be deleted, and delete nothing")
	if _, err := parseSub(fs, pruneUsage, args, 0); err != nil {
		return err
	}
	if age == 0 {
		return usageErrorf("sessions prune needs --older-than <age>, such as --older-than 30d (octet sessions prune -h)")
	}
	_, dir, err := sessionsDir(e)
	if err != nil {
		return err
	}
	infos, listErr := session.List(dir)
	cutoff := time.Now().Add(-age)
	var paths []string
	for _, in := range infos {
		if in.Updated.After(cutoff) || *failed && !lastRunIncomplete(in.Path) {
			continue
		}
		if *dry {
			fmt.Fprintf(e.stdout, "would delete session %s (updated %s) %s\n", in.ID, in.Updated.Local().Format(time.DateTime), visible(oneLine(in.Title, 60)))
		}
		paths = append(paths, in.Path)
	}
	if listErr != nil {
		fmt.Fprintf(e.stderr, "octet: %s\n", visible("some sessions could not be read and are left as they are: "+listErr.Error()))
	}
	if len(paths) == 0 {
		fmt.Fprintf(e.stdout, "no session to prune among the %d in %s\n", len(infos), dir)
	}
	if *dry {
		return nil
	}
	err = removeSessions(dir, paths, e)
	if n := removeLeftovers(dir); n > 0 {
		fmt.Fprintf(e.stdout, "removed %d leftover file(s) of sessions no longer there\n", n)
	}
	if n := removeOrphanTeams(dir); n > 0 {
		fmt.Fprintf(e.stdout, "deleted %d child agent session(s) whose parent session is gone\n", n)
	}
	return err
}

// parseAge parses an age: a Go duration (90m, 12h) or a whole number of
// days (30d) or weeks (2w).
func parseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("want a positive age such as 30d, 2w or 12h")
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var err error
		if d, err = ageIn(n, 24*time.Hour, "d"); err != nil {
			return 0, err
		}
	} else if n, ok := strings.CutSuffix(s, "w"); ok {
		var err error
		if d, err = ageIn(n, 7*24*time.Hour, "w"); err != nil {
			return 0, err
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d <= 0 {
		return 0, bad
	}
	return d, nil
}

// ageIn is n (a whole number) units long, unit named by suffix. A count
// whose duration does not fit is an error, never a product that wrapped
// around (213504d would be 25 minutes, and prune would delete recent
// sessions).
func ageIn(n string, unit time.Duration, suffix string) (time.Duration, error) {
	count, err := strconv.ParseInt(n, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || strings.HasPrefix(n, "-") {
		return 0, errors.New("want a positive age such as 30d, 2w or 12h")
	}
	if most := int64(math.MaxInt64 / unit); err != nil || count > most {
		return 0, fmt.Errorf("%s%s is too large: want at most %d%s", n, suffix, most, suffix)
	}
	return time.Duration(count) * unit, nil
}

// lastRunIncomplete reports whether the session at path recorded no run,
// or its last run did not complete. A session that cannot be read is
// left alone (false).
func lastRunIncomplete(path string) bool {
	s, err := session.Inspect(path)
	if err != nil {
		return false
	}
	defer s.Close()
	cps := s.Checkpoints()
	return len(cps) == 0 || cps[len(cps)-1].Outcome != string(agent.OutcomeCompleted)
}

// removeSessions deletes the sessions at paths, each with its delegated
// children's teams, saying what it deleted; a session open in another
// process, or one that cannot be removed, is left and reported, and the
// others are still deleted.
func removeSessions(dir string, paths []string, e env) error {
	failed := 0
	for _, path := range paths {
		id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		kids, err := removeSession(dir, path)
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(e.stderr, "octet: session %s not deleted: %s\n", id, visible(deleteError(err)))
		case kids > 0:
			fmt.Fprintf(e.stdout, "deleted session %s and its %d child agent session(s)\n", id, kids)
		default:
			fmt.Fprintf(e.stdout, "deleted session %s\n", id)
		}
	}
	if failed > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d session(s) not deleted (see above)", failed, len(paths))}
	}
	return nil
}

// deleteError words a removal failure for the command line.
func deleteError(err error) string {
	if _, ok := errors.AsType[*session.InUseError](err); ok {
		return "it is open in another process (an editor, or a running octet exec); close it there or wait for the run to end, then delete it again"
	}
	if advice := session.WriteFailureAdvice(err); advice != "" {
		return err.Error() + " (" + advice + ")"
	}
	return err.Error()
}

// removeSession deletes the session file at path (refused while a writer
// has it open) and then its delegated children: their sessions and, once
// all of a team's are gone, the team's directory. It returns how many
// child sessions it deleted.
func removeSession(dir, path string) (int, error) {
	id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	kids, kidsErr := team.ChildSessions(host.TeamsDir(dir), id)
	if err := session.Remove(path); err != nil {
		return 0, err
	}
	return removeChildren(kids, kidsErr)
}

// removeChildren deletes the child sessions kids (found with kidsErr) of
// a deleted session and, once all of a team's are gone, the team's
// directory. It returns how many child sessions it deleted.
func removeChildren(kids []team.ChildSession, kidsErr error) (int, error) {
	n := 0
	keep := map[string]bool{}
	var errs []error
	for _, k := range kids {
		err := session.Remove(k.Path)
		switch {
		case err == nil:
			n++
		case errors.Is(err, fs.ErrNotExist):
		default:
			keep[k.Team] = true
			errs = append(errs, err)
		}
	}
	for _, k := range kids {
		if !keep[k.Team] {
			if err := os.RemoveAll(k.Team); err != nil {
				errs = append(errs, err)
			}
			keep[k.Team] = true // once
		}
	}
	if err := errors.Join(append(errs, kidsErr)...); err != nil {
		return n, fmt.Errorf("the session was deleted, but not all of its child agents' sessions: %w", err)
	}
	return n, nil
}

// removeOrphanTeams deletes the teams under dir whose owning session is
// gone (a delete or prune killed between the parent's file and its
// children's, or a session file removed by hand), with their child
// sessions, and returns how many child sessions it deleted. A team
// owned by a child session goes once that child's team went.
func removeOrphanTeams(dir string) int {
	teams := host.TeamsDir(dir)
	n := 0
	// A pass removes the teams whose owner is gone; a team whose owner was
	// a child removed by that pass goes in the next: as many passes as
	// delegation can nest.
	for range team.MaxDepth + 1 {
		owners, err := team.Owners(teams)
		if err != nil {
			return n
		}
		removed := false
		for d, o := range owners {
			if sessionExists(dir, teams, o) {
				continue
			}
			k, err := removeChildren(team.ChildSessions(teams, o))
			n += k
			if err == nil && os.RemoveAll(d) == nil {
				removed = true
			}
		}
		if !removed {
			break
		}
	}
	return n
}

// sessionExists reports whether session id is a top-level session of dir
// or a child session of a team under teams (an id that is not a plain
// name, or a glob pattern, exists, so nothing is removed for it).
func sessionExists(dir, teams, id string) bool {
	if id == "" || filepath.Base(id) != id || strings.HasPrefix(id, ".") || strings.ContainsAny(id, `*?[\`) {
		return true
	}
	if _, err := os.Lstat(filepath.Join(dir, id+".jsonl")); !errors.Is(err, fs.ErrNotExist) {
		return true
	}
	// A child session's file in any team, whether or not its team's
	// journal names it yet (a child being spawned).
	found, err := filepath.Glob(filepath.Join(teams, "team-*", id+".jsonl"))
	return len(found) > 0 || err != nil
}

// removeLeftovers removes the listing caches, holder files and legacy
// markers in dir whose session file is gone (deleted by hand), and
// returns how many it removed.
func removeLeftovers(dir string) int {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range des {
		name := de.Name()
		ext := filepath.Ext(name)
		if !de.Type().IsRegular() || strings.HasPrefix(name, ".") || ext != ".listing" && ext != ".lock" && ext != ".uncertain" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, strings.TrimSuffix(name, ext)+".jsonl")); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			n++
		}
	}
	return n
}
