package fsroot

import (
	"errors"
	"testing"
)

// TestCleanRelWindowsRules runs the Windows path rules on every platform:
// drive letters, UNC and device paths, rooted paths, "\"-separated ".."
// and alternate data streams are rejected; ordinary relative paths with
// either separator pass.
func TestCleanRelWindowsRules(t *testing.T) {
	for _, p := range []string{
		`C:\Windows\system.ini`, `c:/x`, `C:x`, `Z:`,
		`\\server\share\f`, `\\?\C:\x`, `//server/share`, `\x`, `/x`,
		`..\secret`, `a\..\..\b`, `a\..`, `a/..\b`,
		`file.txt:stream`, `dir\f:$DATA`,
	} {
		_, err := cleanRel(p, true)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("cleanRel(%q, windows) = %v, want a *PathError", p, err)
		}
	}
	for _, p := range []string{`a\b.txt`, `dir/sub\f`, `.\x`, `..x\y`, `a..b`} {
		if _, err := cleanRel(p, true); err != nil {
			t.Errorf("cleanRel(%q, windows) = %v, want accepted", p, err)
		}
	}
	// On Unix "\" is an ordinary name byte: `..\x` names one file.
	for _, p := range []string{`..\x`, `C:x`, `a\..\b`} {
		if _, err := cleanRel(p, false); err != nil {
			t.Errorf("cleanRel(%q, unix) = %v, want accepted", p, err)
		}
	}
}
