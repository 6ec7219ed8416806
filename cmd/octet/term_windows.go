package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// ttyPath is the console (reads take keyboard input, writes go to the
// screen buffer).
const ttyPath = "CONIN$"

// isTerminal reports whether f is a console.
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
