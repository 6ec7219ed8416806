//go:build !linux

package tools

import (
	"errors"
	"io"
	"os"
)

// dirLister lists directories through os.File.ReadDir.
type dirLister struct {
	ents []dirEnt
}

// next returns the next chunk of dir's entries, valid until the next
// call; none at the end.
func (l *dirLister) next(dir *os.File) ([]dirEnt, error) {
	ents, err := dir.ReadDir(dirChunk)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	l.ents = l.ents[:0]
	for _, e := range ents {
		l.ents = append(l.ents, dirEnt{name: e.Name(), typ: e.Type()})
	}
	return l.ents, err
}

// dirChunk is how many names of a directory a walk reads at once.
const dirChunk = 4096
