// Package rpcid finds the id of a JSON-RPC request too large to read:
// what its refusal needs to name the request it refuses, so that the
// client's call ends instead of waiting forever. Both of octet's editor
// protocols (LSP framing in server, ACP's lines in acp) use it.
package rpcid

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Scanner finds the top-level "id" member of a JSON-RPC message fed to it
// a chunk at a time, wherever the member comes (an encoder may put it
// after the params), without keeping the message: only the key being
// read (up to two bytes: a longer key is not "id") and the id value
// (bounded) are kept; strings and nested values of any size are skipped.
// Anything that is not a JSON object has no id. The zero value is ready.
type Scanner struct {
	state   scanState
	depth   int  // 1 inside the top-level object
	esc     bool // the previous byte in a string was a backslash
	wantKey bool // at depth 1, the next string is a member's key
	isKey   bool // the string being read is a top-level key
	key     []byte
	keyLong bool
	capture bool // the top-level value being read is the id's
	val     []byte
	valLong bool

	id    json.RawMessage
	found bool
}

type scanState int

const (
	scanStart  scanState = iota // before the top-level '{'
	scanObject                  // in the object, outside strings
	scanString                  // in a string (at any depth)
	scanEnd                     // the top-level object ended, or not an object
)

// The bytes a skip stops at: in a string, its end or an escape; in a
// nested value, a string's start or a bracket.
var stringSpecial, nestedSpecial = byteSet(`"\`), byteSet(`"{}[]`)

func byteSet(s string) (set [256]bool) {
	for i := range len(s) {
		set[s[i]] = true
	}
	return set
}

// indexIn returns the index of the first byte of b in set, or -1.
func indexIn(b []byte, set *[256]bool) int {
	for i, c := range b {
		if set[c] {
			return i
		}
	}
	return -1
}

// maxIDBytes bounds an id value a Scanner keeps; a longer one is no id
// it reports.
const maxIDBytes = 256

// Feed scans the next bytes of the message.
func (sc *Scanner) Feed(b []byte) {
	for len(b) > 0 && sc.state != scanEnd {
		switch sc.state {
		case scanStart:
			b = bytes.TrimLeft(b, " \t\r\n")
			if len(b) == 0 {
				return
			}
			if b[0] != '{' {
				sc.state = scanEnd
				return
			}
			sc.state, sc.depth, b = scanObject, 1, b[1:]
			sc.startKey()
		case scanString:
			b = sc.inString(b)
		case scanObject:
			b = sc.inObject(b)
		}
	}
}

// startKey readies the scanner for the next top-level member.
func (sc *Scanner) startKey() {
	sc.key, sc.keyLong, sc.capture, sc.wantKey = sc.key[:0], false, false, true
}

// inString consumes string bytes up to and including its closing quote.
func (sc *Scanner) inString(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !sc.esc && !sc.isKey && (!sc.capture || sc.valLong) {
			// Nothing of this string is kept: skip to the next byte
			// that matters.
			j := indexIn(b[i:], &stringSpecial)
			if j < 0 {
				return nil
			}
			i += j
			c = b[i]
		}
		switch {
		case sc.esc:
			sc.esc = false
		case c == '\\':
			sc.esc = true
		case c == '"':
			sc.state = scanObject
			if sc.isKey {
				sc.isKey = false
				return b[i+1:]
			}
			sc.keep(c)
			return b[i+1:]
		}
		if sc.isKey {
			if len(sc.key) >= 2 || c == '\\' {
				sc.keyLong = true // not "id" as written (an escaped key is not looked into)
			} else {
				sc.key = append(sc.key, c)
			}
		} else {
			sc.keep(c)
		}
	}
	return nil
}

// keep adds c to the id value when it is being captured.
func (sc *Scanner) keep(c byte) {
	if !sc.capture || sc.valLong {
		return
	}
	if len(sc.val) >= maxIDBytes {
		sc.valLong = true
		return
	}
	sc.val = append(sc.val, c)
}

// inObject consumes bytes outside strings.
func (sc *Scanner) inObject(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if sc.depth > 1 {
			j := indexIn(b[i:], &nestedSpecial)
			if j < 0 {
				return nil
			}
			i += j
			c = b[i]
		}
		switch c {
		case '"':
			sc.state = scanString
			sc.isKey = sc.depth == 1 && sc.wantKey
			sc.wantKey = false
			if !sc.isKey && sc.depth == 1 {
				sc.keep(c)
			}
			return b[i+1:]
		case '{', '[':
			if sc.depth == 1 && sc.capture {
				sc.valLong = true // an object or array is no id
			}
			sc.depth++
		case '}', ']':
			sc.depth--
			if sc.depth == 0 {
				sc.finish()
				sc.state = scanEnd
				return nil
			}
		case ':':
			if sc.depth == 1 {
				sc.capture = !sc.keyLong && string(sc.key) == "id"
				sc.val, sc.valLong = sc.val[:0], false
			}
		case ',':
			if sc.depth == 1 {
				sc.finish()
				sc.startKey()
			}
		default:
			if sc.depth == 1 {
				sc.keep(c)
			}
		}
	}
	return nil
}

// finish ends a top-level member: an id value read whole is the id (the
// last one when a message has several, as a JSON decoder takes it).
func (sc *Scanner) finish() {
	if !sc.capture {
		return
	}
	sc.capture = false
	raw := bytes.TrimSpace(sc.val)
	sc.found = !sc.valLong && isID(raw)
	if sc.found {
		sc.id = append(sc.id[:0], raw...)
	}
}

// isID reports whether raw is a JSON-RPC id octet answers by: a string or
// an integer.
func isID(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// ID returns the id found, as the message spells it (a copy), and
// whether there is one: a string or an integer, read whole.
func (sc *Scanner) ID() (json.RawMessage, bool) {
	if !sc.found {
		return nil, false
	}
	return bytes.Clone(sc.id), true
}
