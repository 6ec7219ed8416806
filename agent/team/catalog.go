package team

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ChildSession describes a delegated child's session as its team's
// provenance records it, for hosts that list, open or delete sessions
// after the team has ended (or after a restart).
type ChildSession struct {
	// SessionID is the child's session; Path its file.
	SessionID, Path string
	// ParentSessionID is the owning (root) session.
	ParentSessionID string
	// AgentID and AgentPath name the child (worker1, root/worker1).
	AgentID, AgentPath string
	// Team is the team's directory; RunID the owning run.
	Team, RunID string
	// Task is the child's first task; Status its last recorded status
	// ("" when none was recorded after the spawn).
	Task   string
	Status Status
	// Shutdown reports that the team recorded its end: no agent of it
	// runs any more (unless it outlived the settle timeout, cancelled).
	Shutdown bool
}

// teamDirs lists the team directories under dir (Config.Dir).
func teamDirs(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && strings.HasPrefix(de.Name(), "team-") {
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	return out, nil
}

// owner reads the owning session of the team at dir from the first line
// of its journal (team_started), without reading the rest.
func owner(dir string) (string, error) {
	f, err := os.Open(filepath.Join(dir, JournalName))
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil {
		return "", err
	}
	var rec Record
	if err := json.Unmarshal(line, &rec); err != nil || rec.Kind != KindTeamStarted {
		return "", errors.New("the journal does not start with team_started")
	}
	return rec.Owner, nil
}

// children reads the child sessions of the team at dir. A journal with a
// damaged line still names the children it recorded before that line:
// they are returned with the error.
func children(dir string) ([]ChildSession, error) {
	recs, err := ReadProvenance(filepath.Join(dir, JournalName))
	var own, run string
	var out []ChildSession
	byID := map[string]int{}
	shutdown := false
	for _, r := range recs {
		switch r.Kind {
		case KindTeamStarted:
			own, run = r.Owner, r.RunID
		case KindAgentSpawned:
			byID[r.Agent] = len(out)
			out = append(out, ChildSession{
				SessionID: r.Session, Path: filepath.Join(dir, r.Session+".jsonl"), ParentSessionID: own,
				AgentID: r.Agent, AgentPath: r.Path, Team: dir, RunID: run, Task: r.Task, Status: StatusPending,
			})
		case KindAgentStatus:
			if i, ok := byID[r.Agent]; ok {
				out[i].Status = Status(r.Status)
			}
		case KindTeamShutdown:
			shutdown = true
		}
	}
	for i := range out {
		out[i].Shutdown = shutdown
	}
	return out, err
}

// unnamedSessions lists the session files in the team directories of
// ownerID under dir that known does not name: children whose spawn
// record a damaged journal lost (their agent and status are unknown).
func unnamedSessions(dir, ownerID string, known []ChildSession) []ChildSession {
	named := make(map[string]bool, len(known))
	for _, c := range known {
		named[c.Path] = true
	}
	dirs, _ := teamDirs(dir)
	var out []ChildSession
	for _, d := range dirs {
		if o, err := owner(d); err != nil || o != ownerID {
			continue
		}
		des, _ := os.ReadDir(d)
		for _, de := range des {
			name, p := de.Name(), filepath.Join(d, de.Name())
			if !de.Type().IsRegular() || name == JournalName || !strings.HasSuffix(name, ".jsonl") || named[p] {
				continue
			}
			out = append(out, ChildSession{SessionID: strings.TrimSuffix(name, ".jsonl"), Path: p, ParentSessionID: ownerID, Team: d})
		}
	}
	return out
}

// ChildSessions returns the delegated child sessions of the owning
// session ownerID under dir (Config.Dir), oldest team first, each team's
// children in spawn order. Teams whose journal cannot be read (or only in
// part: their children named before the damage are listed) are reported
// in the joined error next to those that could.
func ChildSessions(dir, ownerID string) ([]ChildSession, error) {
	dirs, err := teamDirs(dir)
	if err != nil {
		return nil, err
	}
	var out []ChildSession
	var errs []error
	for _, d := range dirs {
		o, err := owner(d)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if o != ownerID {
			continue
		}
		cs, err := children(d)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, cs...)
	}
	return out, errors.Join(errs...)
}

// Owners returns the owning session id of each team under dir
// (Config.Dir), by the team's directory; a team whose journal cannot be
// read is left out.
func Owners(dir string) (map[string]string, error) {
	dirs, err := teamDirs(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(dirs))
	for _, d := range dirs {
		if o, err := owner(d); err == nil {
			out[d] = o
		}
	}
	return out, nil
}

// FindChildSession finds the delegated child session id under dir
// (Config.Dir); ok is false when no team holds it.
func FindChildSession(dir, id string) (ChildSession, bool, error) {
	if id == "" || filepath.Base(id) != id || strings.HasPrefix(id, ".") {
		return ChildSession{}, false, nil
	}
	dirs, err := teamDirs(dir)
	if err != nil {
		return ChildSession{}, false, err
	}
	for _, d := range dirs {
		if _, err := os.Lstat(filepath.Join(d, id+".jsonl")); err != nil {
			continue
		}
		cs, err := children(d)
		for _, c := range cs {
			if c.SessionID == id {
				return c, true, nil
			}
		}
		if err != nil {
			return ChildSession{}, false, err
		}
	}
	return ChildSession{}, false, nil
}
