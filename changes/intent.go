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
	// WriteIntent keeps recs under key (written and synced).
	WriteIntent(key string, recs []Record) error
	// Intent returns the records kept under key (nil when none).
	Intent(key string) ([]Record, error)
	// DropIntent forgets key (its result is durable).
	DropIntent(key string)
	// Commit records recs, the changes a call made, as checkpoint key
	// (Store.Commit): call it before the result naming them is appended.
	Commit(key string, recs []Record) error
}

var _ IntentLog = (*Store)(nil)

func (s *Store) intents() string { return filepath.Join(s.dir, "intents") }

// intentPath returns the file of key: intents/<first 32 hex digits of
// the SHA-256 of key>.json.
func (s *Store) intentPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.intents(), hex.EncodeToString(sum[:16])+".json")
}

// WriteIntent implements IntentLog.
func (s *Store) WriteIntent(key string, recs []Record) error {
	data, err := json.Marshal(recs)
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
func (s *Store) Intent(key string) ([]Record, error) {
	data, err := os.ReadFile(s.intentPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("change store: read the intended changes: %w", err)
	}
	var recs []Record
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("change store: intended changes %s are damaged: %w", s.intentPath(key), err)
	}
	return recs, nil
}

// DropIntent implements IntentLog.
func (s *Store) DropIntent(key string) { _ = os.Remove(s.intentPath(key)) }
