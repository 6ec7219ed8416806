package tools

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// dirLister lists directories with getdents(2) into a buffer it keeps,
// one per walk worker: a chunk's names become one string (the entries'
// names are its substrings), so a listing allocates twice a chunk rather
// than twice an entry, as os.File.ReadDir does.
type dirLister struct {
	buf   []byte
	names []byte
	ends  []int
	types []uint8
	ents  []dirEnt
}

// direntBufSize is how many bytes of entries a getdents call returns at
// most (a few hundred names of a usual length).
const direntBufSize = 32 << 10

// Where a linux_dirent64's fields are: d_ino, d_off, d_reclen, d_type,
// then d_name, NUL-terminated, to d_reclen.
const (
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// next returns the next chunk of dir's entries, but "." and "..", valid
// until the next call; none only at the end (a getdents call may return
// nothing else: tmpfs lists them first, ext4 where their hashes fall).
func (l *dirLister) next(dir *os.File) ([]dirEnt, error) {
	if l.buf == nil {
		l.buf = make([]byte, direntBufSize)
	}
	for {
		n, err := getdents(int(dir.Fd()), l.buf)
		if err != nil || n <= 0 {
			return nil, err
		}
		if err := l.parse(dir, l.buf[:n]); err != nil || len(l.ents) > 0 {
			return l.ents, err
		}
	}
}

// parse makes l.ents of the entries in b, what a getdents call returned.
func (l *dirLister) parse(dir *os.File, b []byte) error {
	l.names, l.ends, l.types, l.ents = l.names[:0], l.ends[:0], l.types[:0], l.ents[:0]
	for len(b) > 0 {
		if len(b) < direntName {
			return fmt.Errorf("list %s: a directory entry of %d bytes", dir.Name(), len(b))
		}
		reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
		if reclen < direntName || reclen > len(b) {
			return fmt.Errorf("list %s: a directory entry of %d bytes", dir.Name(), reclen)
		}
		name := b[direntName:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		typ := b[direntType]
		b = b[reclen:]
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		l.names = append(l.names, name...)
		l.ends = append(l.ends, len(l.names))
		l.types = append(l.types, typ)
	}
	all, start := string(l.names), 0
	for i, end := range l.ends {
		name := all[start:end]
		start = end
		if typ, ok := direntMode(dir, name, l.types[i]); ok {
			l.ents = append(l.ents, dirEnt{name: name, typ: typ})
		}
	}
	return nil
}

// getdents reads directory entries of fd into buf, again when
// interrupted.
func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// direntMode is the type of the entry name of dir whose d_type is typ
// (lstat-ed when the file system did not say); false when it is gone.
func direntMode(dir *os.File, name string, typ uint8) (fs.FileMode, bool) {
	switch typ {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_UNKNOWN:
		isDir, special, ok := typeAt(dir, name)
		switch {
		case !ok:
			return 0, false
		case isDir:
			return fs.ModeDir, true
		case special:
			return fs.ModeIrregular, true
		}
		return 0, true
	}
	return fs.ModeIrregular, true // a link, a device, a pipe, a socket
}
