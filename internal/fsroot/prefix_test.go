//go:build linux

package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadPrefix(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, _ := layout(t)
		must(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("x", 100)), 0o644))
		r := open(ws)
		for _, tt := range []struct {
			rel       string
			limit     int64
			want      string
			truncated bool
			check     func(error) bool
		}{
			{rel: "file.txt", limit: 100, want: "inside\n"},
			{rel: "file.txt", limit: 7, want: "inside\n"},
			{rel: "file.txt", limit: 6, want: "inside", truncated: true},
			{rel: "big.txt", limit: 99, want: strings.Repeat("x", 99), truncated: true},
			{rel: "big.txt", limit: 0, want: strings.Repeat("x", 100)},
			{rel: "dir/sub/deep.txt", limit: 10, want: "deep\n"},
			{rel: "final-link", limit: 10, check: isSymlink},
			{rel: "rel-link", limit: 10, check: isSymlink},
			{rel: "dir-link/secret.txt", limit: 10, check: isSymlink},
			{rel: "dir/inner-link/deep.txt", limit: 10, check: isSymlink},
			{rel: "fifo", limit: 10, check: isNotRegular},
			{rel: "dir", limit: 10, check: isNotRegular},
			{rel: "../out/secret.txt", limit: 10, check: isPathErr},
			{rel: "missing", limit: 10, check: IsNotExist},
		} {
			done := make(chan struct{})
			var (
				data []byte
				cut  bool
				err  error
			)
			go func() { data, cut, err = r.ReadPrefix(tt.rel, tt.limit); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("ReadPrefix(%q) hangs", tt.rel)
			}
			if tt.check != nil {
				if err == nil || !tt.check(err) {
					t.Errorf("ReadPrefix(%q) = %q, %v; want a different error", tt.rel, data, err)
				}
				continue
			}
			if err != nil || string(data) != tt.want || cut != tt.truncated {
				t.Errorf("ReadPrefix(%q, %d) = %q, %v, %v; want %q, %v", tt.rel, tt.limit, data, cut, err, tt.want, tt.truncated)
			}
		}
	})
}

func TestReadHostPrefix(t *testing.T) {
	ws, out := layout(t)
	// The user's own files: links are followed.
	data, cut, err := ReadHostPrefix(filepath.Join(ws, "final-link"), 100)
	if err != nil || string(data) != "SECRET\n" || cut {
		t.Errorf("link: %q, %v, %v", data, cut, err)
	}
	data, cut, err = ReadHostPrefix(filepath.Join(out, "secret.txt"), 3)
	if err != nil || string(data) != "SEC" || !cut {
		t.Errorf("prefix: %q, %v, %v", data, cut, err)
	}
	// A FIFO nobody writes is an error at once, not a hang.
	done := make(chan error, 1)
	go func() { _, _, err := ReadHostPrefix(filepath.Join(ws, "fifo"), 10); done <- err }()
	select {
	case err := <-done:
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != "FIFO" {
			t.Errorf("fifo: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadHostPrefix blocks on a FIFO")
	}
	if _, _, err := ReadHostPrefix(filepath.Join(ws, "missing"), 10); !IsNotExist(err) {
		t.Errorf("missing: %v", err)
	}
}
