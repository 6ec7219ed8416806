package tools

import (
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/fsroot"
)

// Resource limits of the built-in tools. The configurable ones are defaults
// for Config; the rest are product-level upper bounds.
const (
	// DefaultResultTextBytes is the default model-visible text per result
	// of a built-in tool (Config.MaxOutputBytes).
	DefaultResultTextBytes = 50 << 10
	// MaxFileBytes bounds every local file read, edit, write and preview.
	MaxFileBytes = fsroot.MaxFileBytes
	// DefaultBashTimeout is the bash timeout when the call gives none.
	DefaultBashTimeout = 120 * time.Second
	// MaxBashTimeout is the largest timeout a bash call may ask for.
	MaxBashTimeout = 10 * time.Minute
	// DefaultBashMaxOutputBytes bounds the in-memory capture of one bash
	// command (head and tail previews of its combined output).
	DefaultBashMaxOutputBytes = 1 << 20
	// BashKillGrace is how long a process group gets between SIGTERM and
	// SIGKILL once the shell exited, timed out or was cancelled.
	BashKillGrace = 2 * time.Second
	// SpillStreamBytes bounds one bash spill file.
	SpillStreamBytes = 16 << 20
	// SpillTotalBytes bounds all spill files of one bash tool instance,
	// active captures included.
	SpillTotalBytes = 64 << 20
	// SpillMaxFiles bounds the number of spill files of one bash tool
	// instance, active captures included.
	SpillMaxFiles = 32
	// DefaultReadLines is how many lines read returns without a limit.
	DefaultReadLines = 2000
	// MaxLineBytes bounds one line shown by read.
	MaxLineBytes = 2000
	// DefaultSearchResults and MaxSearchResults bound search matches.
	DefaultSearchResults = 100
	MaxSearchResults     = 1000
	// MaxSearchLineBytes bounds one matching line shown by search.
	MaxSearchLineBytes = 300
)

// clipUTF8 cuts s to at most max bytes on a UTF-8 boundary and reports
// whether anything was cut.
func clipUTF8(s string, max int) (string, bool) {
	if max <= 0 || len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}
