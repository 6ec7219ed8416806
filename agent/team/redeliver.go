package team

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/osfile"
	"github.com/octet-agent/octet/session"
)

// ConsumedKey is the details key of a wait result that lists the
// messages its page carried: [{"team","id","end"}], end being the byte
// offset of the message text the page reached. A committed wait result
// in the owner's session is how a later team knows what was consumed.
const ConsumedKey = "consumed_messages"

// MaxRedeliveryTeams bounds how many earlier teams of the same owner
// session a new team reads to redeliver their unconsumed messages (the
// most recent ones).
const MaxRedeliveryTeams = 64

// leasedDetails adds the identity of the page's messages to a wait
// result's details (ConsumedKey).
func (t *Team) leasedDetails(details map[string]any, page []Message) map[string]any {
	if len(page) == 0 {
		return details
	}
	if details == nil {
		details = map[string]any{}
	}
	ids := make([]map[string]any, 0, len(page))
	for _, m := range page {
		ids = append(ids, map[string]any{"team": t.id, "id": m.ID, "end": m.Offset + len(m.Text)})
	}
	details[ConsumedKey] = ids
	return details
}

// earlierMessage is a direct message to the root recorded by an earlier
// team of the same owner session.
type earlierMessage struct {
	key, from, text string
}

// redeliver seeds the root's mailbox with the direct messages to the
// root that earlier teams of the same owner session accepted and that no
// committed wait result in the owner's session consumed (a crash between
// a wait's lease and its result's append, or a run that ended first).
// Each is recorded again (message, with redelivers naming the earlier
// one) before it is in the mailbox; what is left of a message an earlier
// page consumed in part is redelivered from where that page ended. When
// the mailbox is full the rest stay for a later team.
func (t *Team) redeliver() {
	earlier, err := unconsumed(t.cfg.Dir, t.root.sess, t.dir.name)
	if err != nil {
		t.log.Warn("delegation: earlier teams' messages could not all be read", "team", t.id, "err", err)
	}
	for _, m := range earlier {
		if !t.root.box.canPost(len(m.text)) {
			return
		}
		id := t.msgIDs.Add(1)
		if err := t.record(Record{Kind: KindMessage, Agent: "root", Path: "root", From: m.from, Text: m.text, MessageID: id, Redelivers: m.key}); err != nil {
			return
		}
		t.root.box.post(id, m.from, m.text, false)
	}
}

// unconsumed lists the direct messages to the root of owner session sess
// that earlier teams below dir (other than the directory named exclude)
// accepted and no committed wait result in sess consumed whole, each cut
// to what is left of it.
func unconsumed(dir string, sess *session.Session, exclude string) ([]earlierMessage, error) {
	earlier, err := earlierMessages(dir, sess.Header().ID, exclude)
	if len(earlier) == 0 {
		return nil, err
	}
	consumed := consumedEnds(sess)
	out := earlier[:0]
	for _, m := range earlier {
		if end, ok := consumed[m.key]; ok {
			if end >= len(m.text) {
				continue
			}
			for end > 0 && !utf8.RuneStart(m.text[end]) {
				end--
			}
			m.text = m.text[end:]
		}
		out = append(out, m)
	}
	return out, err
}

// consumedEnds reads, from the owner's session, how far committed wait
// results consumed each message ("team/id" to the end offset).
func consumedEnds(sess *session.Session) map[string]int {
	out := map[string]int{}
	for _, e := range sess.Branch() {
		if e.Result == nil || e.Result.Details == nil {
			continue
		}
		raw, ok := e.Result.Details[ConsumedKey]
		if !ok {
			continue
		}
		// In memory the details are as the tool made them; reread from
		// the file they are generic JSON values: normalize through JSON.
		b, err := json.Marshal(raw)
		var list []struct {
			Team string `json:"team"`
			ID   int64  `json:"id"`
			End  int    `json:"end"`
		}
		if err != nil || json.Unmarshal(b, &list) != nil {
			continue
		}
		for _, m := range list {
			if m.Team == "" || m.ID <= 0 {
				continue
			}
			k := m.Team + "/" + strconv.FormatInt(m.ID, 10)
			out[k] = max(out[k], m.End)
		}
	}
	return out
}

// earlierMessages lists, oldest team first and in record order, the
// direct messages to the root recorded by the earlier teams (below dir,
// other than exclude) of owner session owner that a later team did not
// already carry on.
func earlierMessages(dir, owner, exclude string) ([]earlierMessage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	type team struct {
		id      string
		started time.Time
		recs    []Record
	}
	var teams []team
	var errs []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "team-") || e.Name() == exclude {
			continue
		}
		path := filepath.Join(dir, e.Name(), JournalName)
		first, err := firstRecord(path)
		if err != nil || first.Kind != KindTeamStarted || first.Owner != owner {
			continue
		}
		recs, err := ReadProvenance(path)
		if err != nil {
			errs = append(errs, err.Error())
		}
		teams = append(teams, team{id: first.Team, started: first.Time, recs: recs})
	}
	slices.SortStableFunc(teams, func(a, b team) int { return a.started.Compare(b.started) })
	if len(teams) > MaxRedeliveryTeams {
		teams = teams[len(teams)-MaxRedeliveryTeams:]
	}
	carried := map[string]bool{}
	var out []earlierMessage
	for _, tm := range teams {
		id := tm.id
		for _, r := range tm.recs {
			if r.Kind != KindMessage || r.Path != "root" || r.Followup || r.MessageID <= 0 {
				continue
			}
			if r.Redelivers != "" {
				carried[r.Redelivers] = true
			}
			out = append(out, earlierMessage{key: id + "/" + strconv.FormatInt(r.MessageID, 10), from: r.From, text: r.Text})
		}
	}
	out = slices.DeleteFunc(out, func(m earlierMessage) bool { return carried[m.key] })
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// firstRecord reads the first line of a provenance journal (its
// team_started record), at most 64 KiB.
func firstRecord(path string) (Record, error) {
	f, err := osfile.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if err != nil {
		return Record{}, fmt.Errorf("read %s: %w", path, err)
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, fmt.Errorf("read %s: %w", path, err)
	}
	return r, nil
}
