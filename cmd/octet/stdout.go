package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"syscall"
)

// exitStdoutClosed is exec's exit status when its standard output was
// closed under it (octet exec … | head): the run was cancelled and
// settled, as for a cancelled client. It is the status a shell reports
// for a process killed by SIGPIPE (128+13), which octet no longer is.
const exitStdoutClosed = 141

// errStdoutClosed is the cancellation cause of a run whose output could
// no longer be written.
var errStdoutClosed = errors.New("standard output was closed")

// watchedOutput is exec's standard output: the first failed write
// (the reader went away: EPIPE; or the output cannot take more: ENOSPC,
// EIO) cancels the run it renders, which then settles like one a client
// cancelled, with its checkpoint. Later writes fail at once, unwritten.
type watchedOutput struct {
	w      io.Writer
	cancel context.CancelCauseFunc

	mu  sync.Mutex
	err error
}

// watchOutput ignores SIGPIPE (a write to a closed pipe then fails with
// EPIPE instead of killing octet before its run is settled) and returns w
// watched, and ctx cancelled by its first failed write.
func watchOutput(ctx context.Context, w io.Writer) (*watchedOutput, context.Context, context.CancelCauseFunc) {
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancelCause(ctx)
	return &watchedOutput{w: w, cancel: cancel}, ctx, cancel
}

func (o *watchedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
		o.cancel(fmt.Errorf("%w: %w", errStdoutClosed, err))
	}
	return n, err
}

// failed returns the first write error, or nil.
func (o *watchedOutput) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// outputError is exec's error once its output failed: the run was
// cancelled and settled (where says where to find it, or that the
// session was not kept).
func outputError(err error, where string) error {
	code := exitFailed
	what := "the output could not be written"
	if errors.Is(err, syscall.EPIPE) {
		code, what = exitStdoutClosed, "standard output was closed"
	}
	return &exitError{code: code, err: fmt.Errorf("%s (%v): the run was cancelled and settled; %s", what, err, where)}
}
