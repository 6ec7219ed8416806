package main

import (
	"errors"
	"io"
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

// noEcho turns off the console's echo and returns what turns it back on.
func noEcho(tty io.ReadWriteCloser) (restore func(), err error) {
	f, ok := tty.(*os.File)
	if !ok {
		return nil, errors.New("not a console")
	}
	h := windows.Handle(f.Fd())
	var mode uint32
	if err := windows.GetConsoleMode(h, &mode); err != nil {
		return nil, err
	}
	if err := windows.SetConsoleMode(h, mode&^windows.ENABLE_ECHO_INPUT|windows.ENABLE_LINE_INPUT); err != nil {
		return nil, err
	}
	return func() { _ = windows.SetConsoleMode(h, mode) }, nil
}
