package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A checkpoint is the set of blobs one ledger entry's records need (a
// tool call's changes, a rewind's plan). The store expires whole
// checkpoints, oldest first, never a blob a live checkpoint needs, so an
// entry is either rewindable or, expired, says so (Expired).
//
//	checkpoints/<20-digit unix ns>-<id hash>.json   {"id", "blobs"}
//	expired-checkpoints/<id hash>                   the time it expired

// CheckpointID names the checkpoint of call callID of session sessionID
// (also the key of its intent).
func CheckpointID(sessionID, callID string) string { return sessionID + "\x00" + callID }

type checkpointFile struct {
	ID    string   `json:"id"`
	Blobs []string `json:"blobs"`
}

func idHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

func (s *Store) checkpointsDir() string { return filepath.Join(s.dir, "checkpoints") }
func (s *Store) expiredDir() string     { return filepath.Join(s.dir, "expired-checkpoints") }

// Commit records checkpoint id: the stored images of recs, which expire
// only with it. Call it before the entry naming recs is appended.
func (s *Store) Commit(id string, recs []Record) error {
	var blobs []string
	for _, r := range recs {
		for _, img := range []*Image{r.Before, r.After} {
			if img != nil && !img.Dir && !img.Unstored && validSum(img.SHA256) {
				blobs = append(blobs, img.SHA256)
			}
		}
	}
	if len(blobs) == 0 {
		return nil
	}
	slices.Sort(blobs)
	data, err := json.Marshal(checkpointFile{ID: id, Blobs: slices.Compact(blobs)})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := mkdirSynced(s.checkpointsDir()); err != nil {
		return fmt.Errorf("change store: %w", err)
	}
	name := fmt.Sprintf("%020d-%s.json", time.Now().UnixNano(), idHash(id))
	if err := s.writeSynced(filepath.Join(s.checkpointsDir(), name), data); err != nil {
		return fmt.Errorf("change store: record checkpoint: %w", err)
	}
	return nil
}

// Expired reports whether checkpoint id expired (its images were removed
// to keep the store under its cap), and when.
func (s *Store) Expired(id string) (time.Time, bool) {
	data, err := os.ReadFile(filepath.Join(s.expiredDir(), idHash(id)))
	if err != nil {
		return time.Time{}, false
	}
	at, _ := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	return at, true
}

// checkpoint is one checkpoint file, read back.
type checkpoint struct {
	name  string
	id    string
	blobs []string
}

// checkpoints lists the live checkpoints, oldest first.
func (s *Store) checkpoints() []checkpoint {
	ents, _ := os.ReadDir(s.checkpointsDir())
	var out []checkpoint
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.checkpointsDir(), e.Name()))
		var f checkpointFile
		if err != nil || json.Unmarshal(data, &f) != nil {
			continue // torn or unreadable: it protects nothing
		}
		out = append(out, checkpoint{name: e.Name(), id: f.ID, blobs: f.Blobs})
	}
	slices.SortFunc(out, func(a, b checkpoint) int { return strings.Compare(a.name, b.name) })
	return out
}

// expireCheckpoint marks c expired and removes its file.
func (s *Store) expireCheckpoint(c checkpoint, now time.Time) {
	if mkdirSynced(s.expiredDir()) == nil {
		_ = s.writeSynced(filepath.Join(s.expiredDir(), idHash(c.id)), []byte(now.UTC().Format(time.RFC3339Nano)+"\n"))
	}
	_ = os.Remove(filepath.Join(s.checkpointsDir(), c.name))
}

// Hold registers holds, asked about each blob an expiry would remove
// (with the store's lock held: it must not call the store): a blob it
// reports held does not expire. Call release when done. A snapshotter
// holds the images of its snapshots while a command runs.
func (s *Store) Hold(holds func(sum string) bool) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextHold
	s.nextHold++
	if s.holds == nil {
		s.holds = map[int]func(string) bool{}
	}
	s.holds[id] = holds
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.holds, id)
	}
}

// held reports whether a Pin or a Hold keeps sum. The caller holds s.mu.
func (s *Store) held(sum string) bool {
	if s.pinned[sum] > 0 {
		return true
	}
	for _, h := range s.holds {
		if h(sum) {
			return true
		}
	}
	return false
}

// Pin keeps the blobs sums from expiring until Unpin (a bash command's
// prior images, needed before its checkpoint is committed).
func (s *Store) Pin(sums []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pinned == nil {
		s.pinned = map[string]int{}
	}
	for _, sum := range sums {
		s.pinned[sum]++
	}
}

// Unpin undoes Pin.
func (s *Store) Unpin(sums []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sum := range sums {
		if s.pinned[sum]--; s.pinned[sum] <= 0 {
			delete(s.pinned, sum)
		}
	}
}
