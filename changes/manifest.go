package changes

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
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

// maxHeadBytes bounds the snapshot head file: its manifest and the
// CRC-32C of each of a chain of up to MaxManifestChain.
const maxHeadBytes = 128 << 10

// castagnoli is the CRC-32C table (computed by the CPU where it can).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ManifestCRC returns the CRC-32C of a manifest's bytes, as a
// SnapshotHead records it.
func ManifestCRC(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// ManifestBlob is one manifest of a chain as ScanManifest read it.
type ManifestBlob struct {
	Name string
	Size int64
	CRC  uint32 // CRC-32C
}

// SnapshotHead is the latest snapshot of the workspace a process took:
// the next process starts its first snapshot from it (comparing stat
// fields, so only files that changed since are read again).
type SnapshotHead struct {
	// Manifest names the snapshot's manifest.
	Manifest string `json:"manifest"`
	// CRC is the CRC-32C of each manifest of Manifest's chain, by name:
	// a new process checks the head it reads against these rather than
	// against their names (SHA-256), which costs ten times as much. Both
	// catch a blob damaged on disk; neither stops someone who can write
	// the store, who could rewrite a blob and its name as well.
	CRC map[string]uint32 `json:"crc32c,omitempty"`
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
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxHeadBytes {
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

// ScanManifest calls fn with each line of manifest sum and of the
// manifests it builds on — the whole one first, what a reader applies in
// order — with the index of its manifest in the blobs it returns. Each
// manifest is read through a buffer (never whole in memory: a snapshot
// head of a large workspace is tens of megabytes) and checked once read:
// against its CRC-32C in crcs when that has one for it (a snapshot
// head's), else against its name; a line is valid only during its call.
// An error, from the store or from fn, means the lines given so far may
// be damaged: whatever fn made of them is to be thrown away.
func (s *Store) ScanManifest(sum string, crcs map[string]uint32, fn func(part int, line []byte) error) ([]ManifestBlob, error) {
	chain, err := s.ManifestChain(sum)
	if err != nil {
		return nil, err
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("change store: invalid manifest name %q", sum)
	}
	slices.Reverse(chain)
	blobs := make([]ManifestBlob, len(chain))
	buf := bufio.NewReaderSize(nil, 64<<10)
	for i, c := range chain {
		want, known := crcs[c]
		blobs[i] = ManifestBlob{Name: c}
		check := &blobCheck{name: c, crc: crc32.New(castagnoli), want: want, known: known}
		if blobs[i].Size, err = s.scanBlob(check, buf, i == 0, func(line []byte) error { return fn(i, line) }); err != nil {
			return nil, err
		}
		blobs[i].CRC = check.crc.Sum32()
	}
	return blobs, nil
}

// blobCheck checks a manifest read: against its CRC-32C when known, else
// against its name.
type blobCheck struct {
	name  string
	crc   hash.Hash32
	sha   hash.Hash
	want  uint32
	known bool
}

// writer returns what the blob's bytes are to be written to as read.
func (c *blobCheck) writer() io.Writer {
	if c.known {
		return c.crc
	}
	c.sha = sha256.New()
	return io.MultiWriter(c.crc, c.sha)
}

// ok reports whether the blob read is the one named.
func (c *blobCheck) ok() bool {
	if c.known {
		return c.crc.Sum32() == c.want
	}
	return hex.EncodeToString(c.sha.Sum(nil)) == c.name
}

// scanBlob calls fn with each line of blob check.name (the last without
// its newline too) read through buf, checks the blob (check), and
// returns its size; whole requires a whole manifest.
func (s *Store) scanBlob(check *blobCheck, buf *bufio.Reader, whole bool, fn func(line []byte) error) (int64, error) {
	sum := check.name
	f, err := os.Open(s.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, s.notStored(sum)
	}
	if err != nil {
		return 0, fmt.Errorf("change store: %w", err)
	}
	defer f.Close()
	buf.Reset(io.TeeReader(f, check.writer()))
	var size int64
	var long []byte // a line longer than buf
	for {
		line, err := buf.ReadSlice('\n')
		size += int64(len(line))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			long = append(long, line...)
			continue
		case err != nil && err != io.EOF:
			return 0, fmt.Errorf("change store: read blob %s: %w", sum, err)
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if size == int64(len(line)) && whole {
			if base, delta := ManifestBase(line); delta {
				return 0, fmt.Errorf("change store: manifest %s builds on %q, which is not kept", sum, base)
			}
		}
		if len(line) > 0 {
			if ferr := fn(bytes.TrimSuffix(line, []byte("\n"))); ferr != nil {
				return 0, ferr
			}
		}
		if err == io.EOF {
			break
		}
	}
	if !check.ok() {
		return 0, fmt.Errorf("change store: blob %s is damaged (its content no longer matches its name or its CRC-32C)", sum)
	}
	return size, nil
}
