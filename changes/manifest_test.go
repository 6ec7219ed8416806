package changes

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestScanManifest: a manifest chain is scanned whole manifest first,
// each line whole (one longer than the read buffer, the last without
// its newline) with the index of its manifest, and the sizes returned;
// a damaged manifest (checked against its name, or against a CRC-32C
// given for it), a wrong CRC-32C, a chain whose whole manifest is gone
// and an error from the caller each end the scan with an error.
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
	blobs, err := st.ScanManifest(head, nil, func(part int, line []byte) error {
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
	crcs := map[string]uint32{base: crc32.Checksum([]byte(whole), castagnoli), head: crc32.Checksum([]byte(delta), castagnoli)}
	wantBlobs := []ManifestBlob{{base, int64(len(whole)), crcs[base]}, {head, int64(len(delta)), crcs[head]}}
	if !slices.Equal(blobs, wantBlobs) {
		t.Errorf("blobs %v, want %v", blobs, wantBlobs)
	}
	none := func(int, []byte) error { return nil }
	if got, err := st.ScanManifest(head, crcs, none); err != nil || !slices.Equal(got, wantBlobs) {
		t.Errorf("checked against CRC-32C: %v %v", got, err)
	}
	stop := fmt.Errorf("stop")
	if _, err := st.ScanManifest(head, nil, func(int, []byte) error { return stop }); err != stop {
		t.Errorf("the caller's error: %v", err)
	}
	if _, err := st.ScanManifest(head, map[string]uint32{base: crcs[base] + 1}, none); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a CRC-32C that does not match: %v", err)
	}
	if err := os.WriteFile(st.blobPath(base), []byte(strings.Replace(whole, "b", "B", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []map[string]uint32{nil, crcs} {
		if _, err := st.ScanManifest(head, c, none); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("a damaged whole manifest (CRC-32C given: %v): %v", c != nil, err)
		}
	}
	if err := os.Remove(st.blobPath(base)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ScanManifest(head, nil, none); !errors.Is(err, ErrNotStored) {
		t.Errorf("a delta whose base is gone: %v", err)
	}
}
