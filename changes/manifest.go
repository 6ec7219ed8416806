package changes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Manifests. A bash call's checkpoint names the manifest of the snapshot
// of the workspace taken before its command (Intent.Snapshot): a blob
// the store keeps whatever its size ([Store.PutManifest]). A manifest is
// either whole — one line per path — or a delta: its first line names the
// manifest it changes,
//
//	{"base":"<64 hex>",...}
//
// and the lines after it the paths that changed since. Everything else
// about a manifest's lines is the snapshotter's (package tools); the
// store only follows bases, so that the manifests a kept intent, or the
// snapshot head, needs expire with none of their bases.

// MaxManifestChain bounds the deltas between a manifest and the whole
// manifest it builds on: a longer chain is damaged.
const MaxManifestChain = 1024

// manifestBasePrefix begins a delta manifest.
const manifestBasePrefix = `{"base":"`

// ManifestBase returns the manifest a delta manifest builds on, and
// whether data is a delta; "" and false for a whole manifest.
func ManifestBase(data []byte) (string, bool) {
	if !bytes.HasPrefix(data, []byte(manifestBasePrefix)) {
		return "", false
	}
	rest := data[len(manifestBasePrefix):]
	if len(rest) < 64 || !validSum(string(rest[:64])) {
		return "", true // a damaged delta: its base is unknown
	}
	return string(rest[:64]), true
}

// ManifestChain returns the manifests sum builds on, sum first, down to
// a whole manifest. Reading stops (without error) at a manifest the
// store no longer holds; a chain longer than MaxManifestChain is an
// error.
func (s *Store) ManifestChain(sum string) ([]string, error) {
	var chain []string
	for validSum(sum) {
		if len(chain) >= MaxManifestChain {
			return chain, fmt.Errorf("manifest %s: more than %d deltas before a whole manifest", chain[0], MaxManifestChain)
		}
		chain = append(chain, sum)
		base, err := s.manifestBase(sum)
		if err != nil {
			return chain, nil
		}
		sum = base
	}
	return chain, nil
}

// manifestBase reads the first line of manifest sum and returns its base
// ("" for a whole manifest).
func (s *Store) manifestBase(sum string) (string, error) {
	f, err := os.Open(s.blobPath(sum))
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, len(manifestBasePrefix)+64)
	n, _ := f.Read(buf)
	base, _ := ManifestBase(buf[:n])
	return base, nil
}

// headName is the file naming the latest snapshot a process took.
const headName = "snapshot-head"

// SnapshotHead is the latest snapshot of the workspace a process took:
// the next process starts its first snapshot from it (comparing stat
// fields, so only files that changed since are read again).
type SnapshotHead struct {
	// Manifest names the snapshot's manifest.
	Manifest string `json:"manifest"`
	// Written is when the head was written (set by SnapshotHead): blobs
	// that expired after it may be named by the manifest.
	Written time.Time `json:"-"`
}

// SetSnapshotHead records h. It is not synced: a head lost in a crash
// only makes the next process's first snapshot read more files.
func (s *Store) SetSnapshotHead(h SnapshotHead) error {
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode the snapshot head: %w", err)
	}
	if err := s.write(filepath.Join(s.dir, headName), data, false); err != nil {
		return fmt.Errorf("change store: record the snapshot head: %w", err)
	}
	return nil
}

// SnapshotHead returns the head SetSnapshotHead recorded last, and false
// when there is none (or it is damaged).
func (s *Store) SnapshotHead() (SnapshotHead, bool) {
	name := filepath.Join(s.dir, headName)
	f, err := os.Open(name)
	if err != nil {
		return SnapshotHead{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > 4<<10 {
		return SnapshotHead{}, false
	}
	var h SnapshotHead
	if err := json.NewDecoder(f).Decode(&h); err != nil || !validSum(h.Manifest) {
		return SnapshotHead{}, false
	}
	h.Written = st.ModTime()
	return h, true
}

// headBlobs returns the manifests the snapshot head needs.
func (s *Store) headBlobs() []string {
	h, ok := s.SnapshotHead()
	if !ok {
		return nil
	}
	chain, _ := s.ManifestChain(h.Manifest)
	return chain
}

// ReadManifest returns manifest sum and the manifests it builds on, the
// whole one first (what a reader applies in order), with their names.
func (s *Store) ReadManifest(sum string) (names []string, data [][]byte, err error) {
	chain, err := s.ManifestChain(sum)
	if err != nil {
		return nil, nil, err
	}
	if len(chain) == 0 {
		return nil, nil, fmt.Errorf("change store: invalid manifest name %q", sum)
	}
	slices.Reverse(chain)
	data = make([][]byte, len(chain))
	for i, c := range chain {
		if data[i], err = s.Get(c); err != nil {
			return nil, nil, err
		}
	}
	if base, delta := ManifestBase(data[0]); delta {
		return nil, nil, fmt.Errorf("change store: manifest %s builds on %q, which is not kept", sum, base)
	}
	return chain, data, nil
}
