package tools

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"testing"

	"github.com/octet-agent/octet/changes"
)

// FuzzManifestLine: a manifest line decodes back to the path and entry
// it was written for, whatever the path's bytes (a name that is not UTF-8
// included) and the entry's fields; and any line decodes without a
// panic, octet's fast reader agreeing with encoding/json on every line it
// accepts.
func FuzzManifestLine(f *testing.F) {
	f.Add("a/b.txt", false, uint8(0), false, uint32(0o644), int64(12), int64(1796442093790437768), int64(1796442093790437768), uint64(11240168), "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d", []byte(`{"p":"a","m":420,"s":1,"t":2,"c":3,"i":4}`))
	f.Add("dir \"q\"\tä", true, uint8(0), false, uint32(0o755), int64(0), int64(0), int64(0), uint64(7), "", []byte(`{"p":"x","del":true}`))
	f.Add("bad\xff\xfename", false, uint8(2), true, uint32(0o600), int64(5), int64(1), int64(2), uint64(3), "", []byte(`{"p64":"YWJj","m":1}`))
	f.Fuzz(func(t *testing.T, p string, dir bool, skip uint8, racy bool, mode uint32, size, mtime, ctime int64, ino uint64, sum string, raw []byte) {
		e := snapEntry{dir: dir, skip: skipKind(skip % 4), racy: racy, mode: fs.FileMode(mode) & changes.ModeBits, size: size, mtime: mtime, ctime: ctime, ino: ino}
		if len(sum) == 64 {
			e.sum = sum
		}
		if e.dir {
			e.size, e.mtime, e.ctime, e.sum, e.skip, e.racy = 0, 0, 0, "", skipNone, false
		}
		if e.skip != skipNone {
			e.sum = ""
		}
		if json.Valid([]byte(`"`+e.sum+`"`)) && p != "" {
			line := appendEntryLine(nil, p, e)
			var m manifestLine
			if err := decodeLine(line[:len(line)-1], &m); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if got := m.entry(); string(m.pb) != p || got != e {
				t.Fatalf("%q decoded as %q %+v, want %q %+v", line, m.pb, got, p, e)
			}
		}
		var fast, general manifestLine
		if fastLine(raw, &fast) {
			if err := json.Unmarshal(raw, &general); err == nil {
				general.pb = []byte(general.P)
				if string(fast.pb) != string(general.pb) || !reflect.DeepEqual(fast.entry(), general.entry()) {
					t.Fatalf("%q: fast %q %+v, encoding/json %q %+v", raw, fast.pb, fast.entry(), general.pb, general.entry())
				}
			}
		}
		_ = decodeLine(raw, &general)
	})
}

// TestManifestNumbers: the fast reader's numbers stop at what their
// fields hold, as encoding/json's do.
func TestManifestNumbers(t *testing.T) {
	for _, c := range []struct {
		in       string
		signed   bool
		want     int64
		wantU    uint64
		accepted bool
	}{
		{"0", false, 0, 0, true},
		{"9999999999999999999", false, 0, 9999999999999999999, true},
		{"10000000000000000000", false, 0, 10000000000000000000, true},
		{"18446744073709551615", false, 0, 18446744073709551615, true},
		{"18446744073709551620", false, 0, 0, false},
		{"99999999999999999999", false, 0, 0, false},
		{"18446744073709551616", false, 0, 0, false},
		{"184467440737095516150", false, 0, 0, false},
		{"", false, 0, 0, false},
		{"-1", false, 0, 0, false},
		{"9223372036854775807", true, 9223372036854775807, 0, true},
		{"9223372036854775808", true, 0, 0, false},
		{"-9223372036854775808", true, -9223372036854775808, 0, true},
		{"-9223372036854775809", true, 0, 0, false},
		{"-", true, 0, 0, false},
		{"-0", true, 0, 0, true},
	} {
		if c.signed {
			n, rest, ok := fastInt([]byte(c.in + ","))
			if ok != c.accepted || ok && (n != c.want || string(rest) != ",") {
				t.Errorf("fastInt(%q) = %d %q %v", c.in, n, rest, ok)
			}
			continue
		}
		n, rest, ok := fastUint([]byte(c.in + ","))
		if ok != c.accepted || ok && (n != c.wantU || string(rest) != ",") {
			t.Errorf("fastUint(%q) = %d %q %v", c.in, n, rest, ok)
		}
	}
}
