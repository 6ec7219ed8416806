//go:build unix

package fsroot

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Mode returns the ModeBits of the regular file rel beneath the root,
// resolved like Inspect (no-follow, without opening it for reading).
func (r *Root) Mode(rel string) (fs.FileMode, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := r.inspect(clean, &st); err != nil {
		return 0, fmt.Errorf("inspect %s: %w", clean, err)
	}
	return fs.FileMode(uint32(st.Mode)) & ModeBits, nil
}
