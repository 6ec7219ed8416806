package changes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
)

// TestBatch puts blobs from several goroutines through one batch, as a
// snapshot does, and checks that each is kept whole once Sync returns,
// that one over the limit is not, that a blob the batch wrote and a plain
// Put of the same content agree, and that the per-file fallback syncs
// the same files.
func TestBatch(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "store"), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	b := s.Batch()
	sums := make([]string, 64)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(sums); i += 4 {
				sum, stored, err := b.Put([]byte(fmt.Sprintf("blob %d\n", i)))
				if err != nil || !stored {
					t.Errorf("Put %d: stored %v, %v", i, stored, err)
				}
				sums[i] = sum
			}
		})
	}
	wg.Wait()
	if _, stored, err := b.Put(bytes.Repeat([]byte("x"), 2<<10)); err != nil || stored {
		t.Fatalf("a blob over the limit: stored %v, %v", stored, err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, sum := range sums {
		got, err := s.Get(sum)
		if err != nil || string(got) != fmt.Sprintf("blob %d\n", i) {
			t.Fatalf("Get %d = %q, %v", i, got, err)
		}
	}
	if sum, stored, err := s.Put([]byte("blob 3\n")); err != nil || !stored || sum != sums[3] {
		t.Fatalf("Put of a batch's blob: %s %v %v, want %s", sum, stored, err, sums[3])
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("an empty Sync: %v", err)
	}
	var files []string
	for _, sum := range sums {
		files = append(files, s.blobPath(sum))
	}
	if err := syncEach(files); err != nil {
		t.Fatal(err)
	}
	if err := syncEach([]string{filepath.Join(t.TempDir(), "missing")}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("syncEach of a missing file: %v", err)
	}
}
