package tools

import (
	"io/fs"

	"github.com/octet-agent/octet/changes"
)

// newFileMode is the mode fsroot gives a file it creates.
const newFileMode fs.FileMode = 0o644

// stageChange keeps the images of display's change from before to after
// (nil = absent) in the configured change store and returns the records a
// result carries once the change is made (nil when nothing changes). Call
// it right before performing the effect: an error means an image could
// not be kept, and the effect must then not be performed. Every path that
// changes a file (a disk write, an edit routed through the editor) calls
// it with the bytes it changes from and to.
func (c *Config) stageChange(display string, before, after *changes.File) ([]changes.Record, error) {
	rec, ok, err := c.Changes.Stage(display, before, after)
	if err != nil || !ok {
		return nil, err
	}
	return []changes.Record{rec}, nil
}

// fileOf is the changes.File of content read with mode, or nil when the
// file does not exist.
func fileOf(data []byte, mode fs.FileMode, exists bool) *changes.File {
	if !exists {
		return nil
	}
	return &changes.File{Data: data, Mode: mode}
}

// stageErrorText is the model-visible refusal when the change store could
// not keep a file's images.
func stageErrorText(err error) string {
	return err.Error() + "; nothing was written (octet keeps every file's prior content before changing it: free space in $OCTET_HOME or fix its permissions, then try again)"
}
