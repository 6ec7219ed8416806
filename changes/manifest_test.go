package changes

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestScanManifest: a manifest chain is scanned whole manifest first,
// each line whole (one longer than the read buffer, the last without
// its newline) with the index of its manifest, and the sizes returned;
// a damaged manifest, a chain whose whole manifest is gone and an error
// from the caller each end the scan with an error.
func TestScanManifest(t *testing.T) {
	st, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	long := `{"p":"` + strings.Repeat("x", 200<<10) + `"}`
	whole := "{\"p\":\"a\"}\n" + long + "\n{\"p\":\"b\"}" // no final newline
	base, err := st.PutManifest([]byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	delta := fmt.Sprintf("{\"base\":%q}\n{\"p\":\"c\"}\n", base)
	head, err := st.PutManifest([]byte(delta))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	names, sizes, err := st.ScanManifest(head, func(part int, line []byte) error {
		got = append(got, fmt.Sprint(part, " ", len(line), " ", string(line[:min(len(line), 9)])))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0 9 {\"p\":\"a\"}", fmt.Sprint("0 ", len(long), " {\"p\":\"xxx"), "0 9 {\"p\":\"b\"}", "1 75 {\"base\":\"", "1 9 {\"p\":\"c\"}"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines:\n%q\nwant\n%q", got, want)
	}
	if len(names) != 2 || names[0] != base || names[1] != head || sizes[0] != int64(len(whole)) || sizes[1] != int64(len(delta)) {
		t.Errorf("names %v sizes %v", names, sizes)
	}
	stop := fmt.Errorf("stop")
	if _, _, err := st.ScanManifest(head, func(int, []byte) error { return stop }); err != stop {
		t.Errorf("the caller's error: %v", err)
	}
	if err := os.WriteFile(st.blobPath(base), []byte(strings.Replace(whole, "b", "B", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ScanManifest(head, func(int, []byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged whole manifest: %v", err)
	}
	if err := os.Remove(st.blobPath(base)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ScanManifest(head, func(int, []byte) error { return nil }); !errors.Is(err, ErrNotStored) {
		t.Errorf("a delta whose base is gone: %v", err)
	}
}
