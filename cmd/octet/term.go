package main

import (
	"io"
	"os"
)

// openTTY opens the controlling terminal for approval prompts.
func openTTY() (io.ReadWriteCloser, error) { return os.OpenFile(ttyPath, os.O_RDWR, 0) }
