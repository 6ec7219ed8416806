package tools

import (
	"regexp/syntax"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// A lineDFA answers one question for a line of text: does the regular
// expression match anywhere in it? It is a lazily built deterministic
// automaton over the compiled program of regexp/syntax, as RE2's DFA is:
// each state is the set of program instructions a leftmost match could
// be at (the unanchored start included) and what the previous rune was
// for the empty-width assertions (\b, \B, ^, $, \A, \z); a state's
// transition on an ASCII byte is computed once and then followed with
// one load. Non-ASCII runes are decoded and stepped without caching.
// The answers are Go regexp's Match on the same line: the same program,
// the same UTF-8 decoding (an invalid byte is U+FFFD), ASCII \b.
//
// A lineDFA is safe for concurrent use: transitions are published
// atomically, and new states are made under a mutex. When the states
// reach maxDFAStates the automaton stops growing and [lineDFA.match]
// reports ok == false for lines it cannot finish, so the caller falls
// back to the regexp package.
type lineDFA struct {
	prog *syntax.Prog

	mu     sync.Mutex
	states map[string]*dstate
	start  *dstate
}

// maxDFAStates bounds a lineDFA's memory (about 1 KiB per state).
const maxDFAStates = 4096

// prevKind is what the rune before the current position was, all the
// empty-width assertions need of it.
type prevKind uint8

const (
	prevBegin   prevKind = iota // the start of the line
	prevWord                    // an ASCII word character
	prevNonWord                 // anything else
)

// representative returns a rune of kind k for syntax.EmptyOpContext.
func (k prevKind) representative() rune {
	switch k {
	case prevBegin:
		return -1
	case prevWord:
		return 'a'
	}
	return ' '
}

func kindOf(r rune) prevKind {
	if syntax.IsWordChar(r) {
		return prevWord
	}
	return prevNonWord
}

// dstate is one state: the instructions (before their empty-width
// closure, which depends on the next rune) and the previous rune's kind.
type dstate struct {
	pcs  []uint32
	prev prevKind
	// next[b] is the state after ASCII byte b, or matched when a match
	// ends before or at b; nil until computed.
	next [utf8.RuneSelf]atomic.Pointer[dstate]
	// atEnd caches whether a match ends at the end of the line after
	// this state: 0 not computed, 1 no, 2 yes.
	atEnd atomic.Uint32
}

// matched is the sentinel transition: the line matches.
var matched = &dstate{}

// newLineDFA builds the automaton for a parsed expression, or returns
// nil if the program cannot be compiled.
func newLineDFA(re *syntax.Regexp) *lineDFA {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	d := &lineDFA{prog: prog, states: map[string]*dstate{}}
	d.start = d.state([]uint32{uint32(prog.Start)}, prevBegin)
	if d.start == nil {
		return nil
	}
	return d
}

// match reports whether the expression matches somewhere in line; ok is
// false when the automaton ran out of room and the caller must decide.
func (d *lineDFA) match(line []byte) (found, ok bool) {
	s := d.start
	for i := 0; i < len(line); {
		b := line[i]
		var next *dstate
		if b < utf8.RuneSelf {
			next = s.next[b].Load()
			if next == nil {
				next = d.step(s, rune(b))
				if next == nil {
					return false, false
				}
				s.next[b].Store(next)
			}
			i++
		} else {
			r, n := utf8.DecodeRune(line[i:])
			next = d.step(s, r)
			if next == nil {
				return false, false
			}
			i += n
		}
		if next == matched {
			return true, true
		}
		s = next
	}
	switch s.atEnd.Load() {
	case 1:
		return false, true
	case 2:
		return true, true
	}
	var runes []uint32
	end := d.closure(s, syntax.EmptyOpContext(s.prev.representative(), -1), &runes)
	v := uint32(1)
	if end {
		v = 2
	}
	s.atEnd.Store(v)
	return end, true
}

// step is the transition of s on r: matched if a match ends before r,
// else the state after r (nil when there is no room for it).
func (d *lineDFA) step(s *dstate, r rune) *dstate {
	var runes []uint32
	if d.closure(s, syntax.EmptyOpContext(s.prev.representative(), r), &runes) {
		return matched
	}
	next := []uint32{uint32(d.prog.Start)}
	for _, pc := range runes {
		if inst := &d.prog.Inst[pc]; matchesRune(inst, r) {
			next = append(next, inst.Out)
		}
	}
	slices.Sort(next)
	return d.state(slices.Compact(next), kindOf(r))
}

// closure follows s's instructions through every instruction that
// consumes no input under the empty-width flags, collecting the rune
// instructions it reaches in runes; it reports whether it reached a
// match.
func (d *lineDFA) closure(s *dstate, flags syntax.EmptyOp, runes *[]uint32) bool {
	seen := make([]bool, len(d.prog.Inst))
	stack := slices.Clone(s.pcs)
	for len(stack) > 0 {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		inst := &d.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, inst.Out, inst.Arg)
		case syntax.InstCapture, syntax.InstNop:
			stack = append(stack, inst.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(inst.Arg)&^flags == 0 {
				stack = append(stack, inst.Out)
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			*runes = append(*runes, pc)
		}
	}
	return false
}

// matchesRune reports whether a rune instruction consumes r.
func matchesRune(inst *syntax.Inst, r rune) bool {
	switch inst.Op {
	case syntax.InstRune1:
		return r == inst.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return inst.MatchRune(r)
}

// state returns the one state for (pcs, prev), making it if there is
// room; nil if there is not.
func (d *lineDFA) state(pcs []uint32, prev prevKind) *dstate {
	key := make([]byte, 0, 1+4*len(pcs))
	key = append(key, byte(prev))
	for _, pc := range pcs {
		key = append(key, byte(pc), byte(pc>>8), byte(pc>>16), byte(pc>>24))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.states[string(key)]; s != nil {
		return s
	}
	if len(d.states) >= maxDFAStates {
		return nil
	}
	s := &dstate{pcs: pcs, prev: prev}
	d.states[string(key)] = s
	return s
}
