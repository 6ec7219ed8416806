package session

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/octet-agent/octet/internal/jsonstr"
)

// This file holds the small JSON encoder and decoder the ledger uses. The
// ledger controls its own record shapes, so a hand-written scanner can read
// the few fields opening needs without decoding whole records, and typed
// decoding avoids reflection and per-string allocations. Records are still
// plain JSON: any JSON tool can read the file, and the decoder accepts any
// key order and unknown keys.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string (jsonstr.AppendStable). Invalid
// UTF-8 becomes U+FFFD, so that every line the ledger writes is valid
// JSON, and a decoded record encodes again to the same bytes.
func appendString(b []byte, s string) []byte { return jsonstr.AppendStable(b, s) }

// appendKey appends `,"key":` (without the comma for the first member,
// which callers write themselves as part of the opening brace).
func appendKey(b []byte, key string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendStrField appends a string member unless s is empty.
func appendStrField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(appendKey(b, key), s)
}

// appendIntField appends an integer member unless v is zero.
func appendIntField(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

// appendBoolField appends a true member; false is omitted.
func appendBoolField(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	return append(appendKey(b, key), "true"...)
}

// appendStrings appends a string array member unless ss is empty.
func appendStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(appendKey(b, key), '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// maxDepth bounds nesting while skipping values, so hostile input cannot
// exhaust the stack.
const maxDepth = 1000

// errSyntax marks input that is not JSON at all (what a torn write leaves);
// errSchema marks JSON whose shape does not fit the record.
var (
	errSyntax = errors.New("invalid JSON")
	errSchema = errors.New("unexpected JSON type")
)

// decoder reads JSON from a byte slice. The first error sticks; callers
// check d.err once at the end. It never panics on any input.
type decoder struct {
	b       []byte
	i       int
	err     error
	scratch []byte
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = &syntaxError{msg: msg, off: d.i, kind: errSyntax}
	}
}

// failSchema reports valid JSON that does not fit the record.
func (d *decoder) failSchema(msg string) {
	if d.err == nil {
		d.err = &syntaxError{msg: msg, off: d.i, kind: errSchema}
	}
}

// mismatch reports that the next value is not of the wanted type: a
// schema error when a JSON value starts there, a syntax error otherwise.
func (d *decoder) mismatch(msg string) {
	if d.err != nil {
		return
	}
	kind := errSyntax
	switch d.peek() {
	case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		kind = errSchema
	}
	d.err = &syntaxError{msg: msg, off: d.i, kind: kind}
}

// syntaxError locates a decoding failure within its line.
type syntaxError struct {
	msg  string
	off  int
	kind error
}

func (e *syntaxError) Error() string { return e.msg + " at column " + strconv.Itoa(e.off+1) }

func (e *syntaxError) Unwrap() error { return e.kind }

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) eat(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end checks that nothing but whitespace follows the value.
func (d *decoder) end() {
	d.ws()
	if d.err == nil && d.i != len(d.b) {
		d.fail("trailing data after record")
	}
}

// obj iterates the members of an object; fn must consume each value. The
// key slice is valid only during the call.
func (d *decoder) obj(fn func(key []byte)) {
	if d.err != nil {
		return
	}
	if !d.eat('{') {
		d.mismatch("expected object")
		return
	}
	if d.eat('}') {
		return
	}
	for d.err == nil {
		if d.peek() != '"' {
			d.fail("expected object key")
			return
		}
		k := d.strBytes()
		if !d.eat(':') {
			d.fail("expected ':'")
			return
		}
		if d.err != nil {
			return
		}
		fn(k)
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			return
		}
		d.fail("expected ',' or '}'")
	}
}

// arr iterates the elements of an array; fn must consume each one. null
// is an empty array.
func (d *decoder) arr(fn func()) {
	if d.err != nil || d.null() {
		return
	}
	if !d.eat('[') {
		d.mismatch("expected array")
		return
	}
	if d.eat(']') {
		return
	}
	for d.err == nil {
		fn()
		if d.eat(',') {
			continue
		}
		if d.eat(']') {
			return
		}
		d.fail("expected ',' or ']'")
	}
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// stringEnd finds the closing quote of the string starting at d.b[i]
// (which must be '"'). It returns the index of the closing quote and
// whether the body contains escapes, or -1.
func (d *decoder) stringEnd(i int) (int, bool) {
	b := d.b
	i++
	// Short strings (kinds, ids): a plain loop beats two IndexByte calls.
	for j := i; j < len(b) && j < i+24; j++ {
		if b[j] == '"' {
			return j, false
		}
		if b[j] == '\\' {
			break
		}
	}
	escaped := false
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1, false
		}
		k := bytes.IndexByte(b[i:i+j], '\\')
		if k < 0 {
			return i + j, escaped
		}
		escaped = true
		i += k + 2 // skip the backslash and the escaped byte
		if i > len(b) {
			return -1, false
		}
	}
}

// strBytes decodes a string (null is ""). Without escapes the result
// aliases the input; otherwise it lives in d.scratch until the next call.
func (d *decoder) strBytes() []byte {
	if d.err != nil {
		return nil
	}
	if d.peek() != '"' {
		if !d.null() {
			d.mismatch("expected string")
		}
		return nil
	}
	end, escaped := d.stringEnd(d.i)
	if end < 0 {
		d.fail("unterminated string")
		return nil
	}
	body := d.b[d.i+1 : end]
	if !escaped {
		d.i = end + 1
		return body
	}
	out, ok := unescape(d.scratch[:0], body)
	if !ok {
		d.fail("invalid escape in string")
		return nil
	}
	d.scratch = out
	d.i = end + 1
	return out
}

// str decodes a string into memory owned by a.
func (d *decoder) str(a *strAlloc) string { return a.str(d.strBytes()) }

// unescape appends the decoded form of a JSON string body to dst.
func unescape(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...), true
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			return dst, false
		}
		switch s[i+1] {
		case '"', '\\', '/':
			dst = append(dst, s[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return dst, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if v, ok := hex4(s[i+2:]); ok {
						r2 = v
					}
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, false
		}
		i += 2
	}
	return dst, true
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// int decodes an integer (null is 0).
func (d *decoder) int() int64 {
	if d.err != nil || d.null() {
		return 0
	}
	d.ws()
	start := d.i
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	var v uint64
	digits := 0
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		v = v*10 + uint64(d.b[d.i]-'0')
		d.i++
		digits++
	}
	limit := uint64(1<<63 - 1)
	if neg {
		limit++
	}
	bad := digits == 0 || digits > 19 || v > limit ||
		d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E')
	if bad {
		d.i = start
		d.mismatch("expected integer")
		return 0
	}
	if neg {
		return -int64(v)
	}
	return int64(v)
}

// bool decodes a boolean (null is false).
func (d *decoder) bool() bool {
	if d.err != nil || d.null() {
		return false
	}
	d.ws()
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false
	}
	d.mismatch("expected boolean")
	return false
}

// raw consumes any value and returns its bytes.
func (d *decoder) raw() []byte {
	d.ws()
	start := d.i
	d.skip(0)
	if d.err != nil {
		return nil
	}
	return d.b[start:d.i]
}

// skip consumes any value, checking its structure.
func (d *decoder) skip(depth int) {
	if d.err != nil {
		return
	}
	if depth > maxDepth {
		d.err = &syntaxError{msg: "nesting too deep", off: d.i, kind: errSchema}
		return
	}
	switch c := d.peek(); c {
	case '"':
		end, _ := d.stringEnd(d.i)
		if end < 0 {
			d.fail("unterminated string")
			return
		}
		d.i = end + 1
	case '{':
		d.obj(func([]byte) { d.skip(depth + 1) })
	case '[':
		d.arr(func() { d.skip(depth + 1) })
	case 't', 'f':
		d.bool()
	case 'n':
		if !d.null() {
			d.fail("invalid literal")
		}
	default:
		d.number()
	}
}

// number consumes a JSON number.
func (d *decoder) number() {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		d.fail("invalid value")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			d.fail("invalid number")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.fail("invalid number")
			return
		}
	}
	d.i = i
}

// strAlloc hands out strings carved from large shared blocks, so decoding
// a long branch costs a few allocations instead of one per string. A block
// stays alive while any string in it does.
type strAlloc struct {
	buf []byte
	// items is scratch space for decoding; itemBlock backs the item
	// slices handed out.
	items     []Item
	itemBlock []Item
	// results backs the tool results handed out.
	results []ToolResult
	// scratch is decodeEntry's reusable unescaping buffer.
	scratch []byte
	// recent caches short strings that repeat from entry to entry (types,
	// run ids, tool names), so a long branch holds one copy of each.
	recent [64]string
}

// intern returns b as a string, shared with an earlier equal one when
// the small cache still holds it.
func (a *strAlloc) intern(b []byte) string {
	if a == nil || len(b) == 0 || len(b) > 32 {
		return a.str(b)
	}
	h := uint(len(b))
	for _, c := range b {
		h = h*31 + uint(c)
	}
	slot := &a.recent[h%uint(len(a.recent))]
	if *slot == string(b) {
		return *slot
	}
	*slot = a.str(b)
	return *slot
}

// result returns a zero ToolResult carved from a shared block.
func (a *strAlloc) result() *ToolResult {
	if a == nil {
		return new(ToolResult)
	}
	if len(a.results) == cap(a.results) {
		a.results = make([]ToolResult, 0, 256)
	}
	a.results = a.results[:len(a.results)+1]
	return &a.results[len(a.results)-1]
}

// itemSlice copies items into a shared block and returns the copy.
func (a *strAlloc) itemSlice(items []Item) []Item {
	if len(items) == 0 {
		return nil
	}
	if cap(a.itemBlock)-len(a.itemBlock) < len(items) {
		a.itemBlock = make([]Item, 0, max(1024, len(items)))
	}
	start := len(a.itemBlock)
	a.itemBlock = append(a.itemBlock, items...)
	clear(items)
	return a.itemBlock[start:len(a.itemBlock):len(a.itemBlock)]
}

const (
	allocBlock = 256 << 10
	allocSmall = 4 << 10
)

func (a *strAlloc) str(b []byte) string {
	if len(b) == 0 || a == nil { // nil: validating only
		return ""
	}
	if len(b) > allocSmall {
		return string(b)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, allocBlock)
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return unsafe.String(&a.buf[start], len(b))
}
