package fsroot

import (
	"errors"
	"testing"
)

// TestCleanRelWindowsRules runs the Windows path rules on every platform:
// drive letters, UNC and device paths, rooted paths, "\"-separated "..",
// alternate data streams, device names, trailing dots and spaces and
// characters off the component allowlist are rejected; ordinary relative
// paths with either separator pass and come back "/"-separated.
func TestCleanRelWindowsRules(t *testing.T) {
	for _, p := range []string{
		`C:\Windows\system.ini`, `c:/x`, `C:x`, `Z:`,
		`\\server\share\f`, `\\?\C:\x`, `//server/share`, `\x`, `/x`,
		`..\secret`, `a\..\..\b`, `a\..`, `a/..\b`,
		`file.txt:stream`, `dir\f:$DATA`, `f::$DATA`,
		// Device names, with or without an extension, in any component.
		`CON`, `con`, `nul.txt`, `dir\AUX`, `PRN.log`, `COM1`, `com9.c`, `LPT1`, `lpt0.x`,
		`CONIN$`, `conout$.txt`, "COM\u00b9", `NUL .txt`,
		// Trailing dots and spaces (Windows strips them: another file).
		`file.`, `file `, `dir.\f`, `dir \f`, `...`,
		// Characters not on the allowlist.
		`a<b`, `a>b`, `a"b`, `a|b`, `a?b`, `a*b`, "a\x01b", "a\tb", "a\x7fb", "a\u202eb", "\xff\xfe",
	} {
		_, err := cleanRel(p, true)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("cleanRel(%q, windows) = %v, want a *PathError", p, err)
		}
	}
	for p, want := range map[string]string{
		`a\b.txt`: "a/b.txt", `dir/sub\f`: "dir/sub/f", `.\x`: "x", `..x\y`: "..x/y", `a..b`: "a..b",
		`.`: ".", `dir\`: "dir", `CONSOLE.txt`: "CONSOLE.txt", `COM10`: "COM10", `nul_x`: "nul_x",
		`my file (2).txt`: "my file (2).txt", `.gitignore`: ".gitignore", `日本語\ファイル.go`: "日本語/ファイル.go",
		`a+b=c;d,e@f#g$h%i&j'k[l]m^n_o{p}q~r!s` + "`": `a+b=c;d,e@f#g$h%i&j'k[l]m^n_o{p}q~r!s` + "`",
	} {
		got, err := cleanRel(p, true)
		if err != nil || got != want {
			t.Errorf("cleanRel(%q, windows) = %q, %v; want %q", p, got, err, want)
		}
	}
	// On Unix "\" is an ordinary name byte: `..\x` names one file.
	for _, p := range []string{`..\x`, `C:x`, `a\..\b`} {
		if _, err := cleanRel(p, false); err != nil {
			t.Errorf("cleanRel(%q, unix) = %v, want accepted", p, err)
		}
	}
}
