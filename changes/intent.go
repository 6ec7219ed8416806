package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// IntentLog keeps the changes a tool call is about to make, durably,
// before the call makes them: a process killed between a file's change
// and the durable result of the call that made it leaves the change in
// the log, and crash recovery records it with the call's indeterminate
// result, so the ledger shows it and a rewind can take it back.
type IntentLog interface {
	// WriteIntent keeps in under key (written and synced).
	WriteIntent(key string, in Intent) error
	// Intent returns what is kept under key (zero when nothing is).
	Intent(key string) (Intent, error)
	// DropIntent forgets key (its result is durable).
	DropIntent(key string)
	// Commit records recs, the changes a call made, as checkpoint key
	// (Store.Commit): call it before the result naming them is appended.
	Commit(key string, recs []Record) error
}

var _ IntentLog = (*Store)(nil)

// Intent is what a call is about to change: an edit's or write's records
// (images kept), or the manifest of the snapshot a bash call took before
// its command (what it changes is only known after).
type Intent struct {
	Records []Record `json:"records,omitempty"`
	// Snapshot names the manifest blob of the workspace before a command.
	Snapshot string `json:"snapshot,omitempty"`
}

// Empty reports whether in says nothing.
func (in Intent) Empty() bool { return len(in.Records) == 0 && in.Snapshot == "" }

func (s *Store) intents() string { return filepath.Join(s.dir, "intents") }

// intentPath returns the file of key: intents/<first 32 hex digits of
// the SHA-256 of key>.json.
func (s *Store) intentPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.intents(), hex.EncodeToString(sum[:16])+".json")
}

// WriteIntent implements IntentLog.
func (s *Store) WriteIntent(key string, in Intent) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode the intended changes: %w", err)
	}
	if err := mkdirSynced(s.intents()); err != nil {
		return fmt.Errorf("change store: %w", err)
	}
	if err := s.writeSynced(s.intentPath(key), data); err != nil {
		return fmt.Errorf("change store: keep the intended changes: %w", err)
	}
	return nil
}

// Intent implements IntentLog.
func (s *Store) Intent(key string) (Intent, error) {
	data, err := os.ReadFile(s.intentPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Intent{}, nil
	}
	if err != nil {
		return Intent{}, fmt.Errorf("change store: read the intended changes: %w", err)
	}
	var in Intent
	if err := json.Unmarshal(data, &in); err != nil {
		return Intent{}, fmt.Errorf("change store: intended changes %s are damaged: %w", s.intentPath(key), err)
	}
	return in, nil
}

// DropIntent implements IntentLog.
func (s *Store) DropIntent(key string) { _ = os.Remove(s.intentPath(key)) }

// intentBlobs returns the blobs the kept intents name (their records'
// images, a snapshot's manifest and the manifests it builds on): a
// call's images are needed from its intent on, before its checkpoint is
// committed, so they do not expire.
func (s *Store) intentBlobs() []string {
	ents, _ := os.ReadDir(s.intents())
	var out []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(s.intents(), e.Name()))
		if err != nil {
			continue
		}
		var in Intent
		if json.Unmarshal(data, &in) != nil {
			continue
		}
		for _, r := range in.Records {
			for _, img := range []*Image{r.Before, r.After} {
				if img != nil && !img.Dir && !img.Unstored && validSum(img.SHA256) {
					out = append(out, img.SHA256)
				}
			}
		}
		if validSum(in.Snapshot) {
			chain, _ := s.ManifestChain(in.Snapshot) // a delta needs its bases
			out = append(out, chain...)
		}
	}
	return out
}
