package tools

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"

	"github.com/octet-agent/octet/internal/fsroot"
)

// errChangedSinceShown is the model-visible refusal when the file an edit
// or write targets no longer holds what the approval prompt's diff was
// computed against.
const errChangedSinceShown = "file changed after the change was shown for approval; nothing was written"

// maxShownPriors bounds the previews a tool remembers. An entry is dropped
// when its call executes; only previews whose call never executes (denied,
// expired, cancelled) linger, and the least recently recorded goes first.
const maxShownPriors = 256

// previewCallKey is the context key under which the broker passes the
// provider call id and the principal to Previewer.Preview.
type previewCallKey struct{}

// previewCall is what a Preview context carries.
type previewCall struct{ callID, principal string }

// withPreviewCall returns ctx carrying callID and principal for a
// Preview call, so a tool can bind what it shows to the call that later
// executes and check it against what that agent read.
func withPreviewCall(ctx context.Context, callID, principal string) context.Context {
	return context.WithValue(ctx, previewCallKey{}, previewCall{callID, principal})
}

// previewCallID returns the call id the broker attached to a Preview
// context, or "" when Preview was called outside an approval.
func previewCallID(ctx context.Context) string {
	c, _ := ctx.Value(previewCallKey{}).(previewCall)
	return c.callID
}

// previewPrincipal returns the principal the broker attached to a
// Preview context ("" outside an approval).
func previewPrincipal(ctx context.Context) string {
	c, _ := ctx.Value(previewCallKey{}).(previewCall)
	return c.principal
}

// fileState is what a file tool observed of its target: its content hash
// (or absence) as an fsroot.Prior, or readable false when it could not be
// read for another reason (a directory, a symlink, too large, no access).
// An open editor document's state is its text's (editorState).
type fileState struct {
	prior    fsroot.Prior
	readable bool
}

// stateOf classifies the outcome of reading a target.
func stateOf(data []byte, err error) fileState {
	switch {
	case err == nil:
		return fileState{prior: fsroot.PriorOf(data), readable: true}
	case fsroot.IsNotExist(err):
		return fileState{prior: fsroot.Absent, readable: true}
	}
	return fileState{}
}

// changedFrom reports whether the current state cur differs from the
// shown state: whether the target no longer holds the bytes the shown
// diff was computed against. Where those bytes are (an editor buffer at
// some version, or the file) does not matter: the same change of the
// same bytes is what was approved, and it goes where the target is now
// (a buffer closed since, with its file holding the same text, is
// changed on disk; one opened since goes through the editor). An
// unreadable current state is not reported here: the tool refuses it
// with its own file error and writes nothing.
func (shown fileState) changedFrom(cur fileState) bool {
	if !cur.readable {
		return false
	}
	return !shown.readable || shown.prior != cur.prior
}

// shownPriors remembers, per call (provider call id plus a hash of the
// canonical arguments), the target state the approval preview's diff was
// computed against, so Execute applies exactly the approved change or
// nothing. It is bounded (LRU) and safe for concurrent use.
type shownPriors = shownStates[fileState]

// shownStates is shownPriors for any state: a single file's
// (fileState), or the states of every file of a patch.
type shownStates[S any] struct {
	mu      sync.Mutex
	entries map[shownKey]*list.Element
	order   list.List // of *shownEntry[S], most recent at the front
}

type shownKey struct {
	callID string
	args   [32]byte
}

type shownEntry[S any] struct {
	key   shownKey
	state S
}

func newShownPriors() *shownPriors { return newShownStates[fileState]() }

func newShownStates[S any]() *shownStates[S] {
	return &shownStates[S]{entries: map[shownKey]*list.Element{}}
}

func makeShownKey(callID string, args json.RawMessage) shownKey {
	return shownKey{callID: callID, args: sha256.Sum256(args)}
}

// remember records st as what the preview for (callID, args) showed. It
// does nothing for an empty call id (a preview outside an approval).
func (s *shownStates[S]) remember(callID string, args json.RawMessage, st S) {
	if callID == "" {
		return
	}
	k := makeShownKey(callID, args)
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[k]; ok {
		el.Value.(*shownEntry[S]).state = st
		s.order.MoveToFront(el)
		return
	}
	s.entries[k] = s.order.PushFront(&shownEntry[S]{key: k, state: st})
	for s.order.Len() > maxShownPriors {
		oldest := s.order.Back()
		s.order.Remove(oldest)
		delete(s.entries, oldest.Value.(*shownEntry[S]).key)
	}
}

// take removes and returns the state recorded for (callID, args); ok is
// false when no preview was recorded for exactly this call.
func (s *shownStates[S]) take(callID string, args json.RawMessage) (st S, ok bool) {
	if callID == "" {
		return st, false
	}
	k := makeShownKey(callID, args)
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[k]
	if !ok {
		return st, false
	}
	s.order.Remove(el)
	delete(s.entries, k)
	return el.Value.(*shownEntry[S]).state, true
}

// len returns the number of remembered previews.
func (s *shownStates[S]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// commitErrorText maps a WriteFile error for a call bound to a preview:
// a compare-before-commit mismatch means the file changed after approval.
func commitErrorText(display string, err error, bound bool) string {
	var ce *fsroot.ChangedError
	if bound && errors.As(err, &ce) {
		return errChangedSinceShown
	}
	return fileErrorText(display, err)
}
