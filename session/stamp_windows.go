package session

import (
	"os"

	"github.com/octet-agent/octet/internal/osfile"
)

// stampOf is the stamp of the open file f (fi is its Stat): its file id,
// size and modification time (Windows has no ctime to add).
func stampOf(f *os.File, fi os.FileInfo) (fileStamp, error) {
	id, err := osfile.FileID(f)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{ino: id, size: fi.Size(), mtime: fi.ModTime().UnixNano()}, nil
}

// stampAt reports no stamp: without a cheap no-follow stat by directory
// handle, a Lister re-reads every file on Windows (as List does).
func stampAt(*os.File, string) (fileStamp, bool) { return fileStamp{}, false }
