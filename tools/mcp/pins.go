package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/octet-agent/octet/internal/osfile"
)

// PinsFile is where pins live under $OCTET_HOME.
const PinsFile = "mcp/pins.json"

// maxPinsBytes bounds the pins file.
const maxPinsBytes = 4 << 20

// PinStore keeps, per server, the digest of every tool definition the
// user accepted: all of them when the server was first enabled, and each
// one re-enabled since. The file is owner-only (0600 in a 0700
// directory), replaced atomically, and re-read before every change so
// two octet processes do not undo each other's pins of other servers.
type PinStore struct {
	path string // "" keeps pins in memory only

	mu  sync.Mutex
	mem map[string]map[string]string
}

type pinsDoc struct {
	Version int                          `json:"version"`
	Servers map[string]map[string]string `json:"servers"`
}

// OpenPins returns the store under home ($OCTET_HOME).
func OpenPins(home string) *PinStore { return &PinStore{path: filepath.Join(home, PinsFile)} }

// NewMemoryPins returns a store that is not persisted.
func NewMemoryPins() *PinStore { return &PinStore{mem: map[string]map[string]string{}} }

// Server returns the pinned digests of server's tools by tool name, and
// whether the server was ever pinned. A store that cannot be read reports
// the server as pinned with no tools, so every tool is withheld rather
// than trusted afresh.
func (p *PinStore) Server(server string) (map[string]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, err := p.load()
	if err != nil {
		return map[string]string{}, true
	}
	pins, ok := all[server]
	return maps.Clone(pins), ok
}

// Check returns why the store cannot be read (nil when it can): every
// tool is withheld meanwhile.
func (p *PinStore) Check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.load()
	return err
}

// Set replaces server's pins.
func (p *PinStore) Set(server string, pins map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, err := p.load()
	if err != nil {
		return err
	}
	all[server] = maps.Clone(pins)
	return p.save(all)
}

// Forget removes server's pins: the next start pins what it presents, as
// on its first enable (octet mcp unpin NAME).
func (p *PinStore) Forget(server string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, err := p.load()
	if err != nil {
		return err
	}
	delete(all, server)
	return p.save(all)
}

func (p *PinStore) load() (map[string]map[string]string, error) {
	if p.path == "" {
		return p.mem, nil
	}
	f, err := osfile.OpenNoFollow(p.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MCP pins %s: %w", p.path, err)
	}
	defer f.Close()
	var doc pinsDoc
	dec := json.NewDecoder(&limitedReader{f: f, n: maxPinsBytes})
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("read MCP pins %s: %w (remove the file to pin every server afresh)", p.path, err)
	}
	if doc.Servers == nil {
		doc.Servers = map[string]map[string]string{}
	}
	return doc.Servers, nil
}

func (p *PinStore) save(all map[string]map[string]string) error {
	if p.path == "" {
		p.mem = all
		return nil
	}
	dir := filepath.Dir(p.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write MCP pins: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("write MCP pins: %w", err)
	}
	b, err := json.MarshalIndent(pinsDoc{Version: 1, Servers: all}, "", "  ")
	if err != nil {
		return fmt.Errorf("write MCP pins: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".pins-*")
	if err != nil {
		return fmt.Errorf("write MCP pins: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(append(b, '\n'))
		if err == nil {
			err = osfile.Sync(tmp)
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p.path)
	}
	if err != nil {
		return fmt.Errorf("write MCP pins %s: %w", p.path, err)
	}
	return nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (r *limitedReader) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxPinsBytes)
	}
	if int64(len(b)) > r.n {
		b = b[:r.n]
	}
	n, err := r.f.Read(b)
	r.n -= int64(n)
	return n, err
}
