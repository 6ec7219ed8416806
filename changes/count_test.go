package changes

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// heldCount makes s's count of the blobs' total size wait, once begun,
// until the returned function is called; it reports on began when the
// count begins. Call it before s's first write.
func heldCount(t *testing.T, s *Store) (began <-chan struct{}, release func()) {
	t.Helper()
	b, r := make(chan struct{}, 1), make(chan struct{})
	s.countHook = func() {
		b <- struct{}{}
		<-r
	}
	released := false
	release = func() {
		if !released {
			released = true
			close(r)
		}
	}
	t.Cleanup(release)
	return b, release
}

// filledStore returns the directory of a store holding n blobs of size
// bytes, written by a process before this one.
func filledStore(t *testing.T, n, size int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, size-4)
		data = append(data, byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
		if _, _, err := s.Put(data); err != nil {
			t.Fatal(err)
		}
	}
	<-s.Counted()
	return dir
}

// blobBytes is the blobs' total size as found on disk.
func blobBytes(s *Store) int64 {
	var n int64
	for _, b := range s.scan() {
		n += b.size
	}
	return n
}

// putWithin puts data into s in the background and returns the blob's
// sum if the put returned within d ("" if not), and a channel closed
// once it returns.
func putWithin(t *testing.T, s *Store, data []byte, d time.Duration) (sum string, returned chan struct{}) {
	t.Helper()
	returned = make(chan struct{})
	sumc := make(chan string, 1)
	go func() {
		defer close(returned)
		sum, _, err := s.Put(data)
		if err != nil {
			t.Error(err)
		}
		sumc <- sum
	}()
	select {
	case <-returned:
		return <-sumc, returned
	case <-time.After(d):
		return "", returned
	}
}

// TestFirstWriteDoesNotWaitForCount: a process's first write to a store
// it did not count yet returns without waiting for the count of every
// blob (which runs in the background), and the count, once done, is the
// blobs' total size exactly — a blob written while it ran counted once,
// though the count finds it on disk too.
func TestFirstWriteDoesNotWaitForCount(t *testing.T) {
	dir := filledStore(t, 50, 100)
	s, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	began, release := heldCount(t, s)
	sum, returned := putWithin(t, s, []byte("the first write of this process"), 5*time.Second)
	if sum == "" {
		t.Fatal("the first write waited for the count of the store's blobs")
	}
	<-began
	if _, _, err := s.Put([]byte("a second write, while the count runs")); err != nil {
		t.Fatal(err)
	}
	release()
	<-returned
	<-s.Counted()
	s.mu.Lock()
	total := s.total
	s.mu.Unlock()
	if want := blobBytes(s); total != want {
		t.Errorf("counted %d bytes, the blobs hold %d", total, want)
	}
	if _, err := s.Get(sum); err != nil {
		t.Error(err)
	}
}

// TestWriteOverCapWaitsForCount: while the count runs, a write that takes
// what was written since over the cap by itself waits for it, then
// expires blobs — never the one just written; a write under the cap does
// not wait, and the first write after the count checks the cap.
func TestWriteOverCapWaitsForCount(t *testing.T) {
	dir := filledStore(t, 20, 100) // 2,000 bytes
	t.Run("over by itself", func(t *testing.T) {
		s, err := Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		began, release := heldCount(t, s)
		s.SetMaxBytes(1000)
		big := bytes.Repeat([]byte("b"), 1500)
		sum, returned := putWithin(t, s, big, 100*time.Millisecond)
		if sum != "" {
			t.Fatal("a write over the cap by itself did not wait for the count")
		}
		<-began
		release()
		<-returned
		if _, err := os.Stat(filepath.Join(dir, expiredName)); err != nil {
			t.Errorf("no expiry recorded: %v", err)
		}
		if n := blobBytes(s); n != int64(len(big)) {
			t.Errorf("%d bytes left; only the blob just written (%d) should be", n, len(big))
		}
	})
	t.Run("after the count", func(t *testing.T) {
		dir := filledStore(t, 20, 100)
		s, err := Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		began, release := heldCount(t, s)
		s.SetMaxBytes(1000) // the store is over it already
		if sum, _ := putWithin(t, s, []byte("small"), 5*time.Second); sum == "" {
			t.Fatal("a write under the cap by itself waited for the count")
		}
		<-began
		release()
		<-s.Counted()
		if _, err := os.Stat(filepath.Join(dir, expiredName)); err == nil {
			t.Fatal("expired before the count")
		}
		if _, _, err := s.Put([]byte("the next write")); err != nil {
			t.Fatal(err)
		}
		if n := blobBytes(s); n > 900 {
			t.Errorf("%d bytes left after the first write past the count; want at most 90%% of the cap", n)
		}
	})
}
