package provider

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The hot path of every stream is the delta event (one per token or so).
// fastDelta decodes those few shapes without reflection so a text delta
// costs one allocation (its text). Anything unexpected (an unknown field
// that the general decoder would type-check, a non-integer index, a
// non-string delta, an escaped key) returns ok=false and the general
// json.Unmarshal path decides; FuzzDecodeEvent checks both paths agree.

// fastKinds maps the delta event types to the Event type they produce.
var fastKinds = map[string]EventType{
	"response.output_text.delta":             EventTextDelta,
	"response.refusal.delta":                 EventTextDelta,
	"response.reasoning_summary_text.delta":  EventReasoningDelta,
	"response.reasoning_text.delta":          EventReasoningDelta,
	"response.function_call_arguments.delta": EventToolCallDelta,
	"response.custom_tool_call_input.delta":  EventToolCallDelta,
}

// fastDelta decodes a payload if it is a plain delta event. It validates
// everything it accepts (structure, strings, and every skipped value), so
// it runs before and instead of a separate json.Valid pass.
func (d *decoder) fastDelta(data []byte) (Event, bool) {
	var (
		typ, itemID, delta []byte
		deltaEsc           bool
		outIdx             = -1
		sumIdx             int
	)
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return Event{}, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return Event{}, false
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return Event{}, false
		}
		key, esc, next := scanString(data, i)
		if esc || next < 0 {
			return Event{}, false
		}
		i = skipSpace(data, next)
		if i >= len(data) || data[i] != ':' {
			return Event{}, false
		}
		i = skipSpace(data, i+1)
		var ok bool
		switch fieldOf(key) {
		case fieldType:
			typ, ok, i = stringValue(data, i, false)
		case fieldItemID:
			itemID, ok, i = stringValue(data, i, false)
		case fieldDelta:
			if i < len(data) && data[i] == '"' {
				var next int
				delta, deltaEsc, next = scanString(data, i)
				ok, i = next >= 0, next
			}
		case fieldOutputIndex:
			outIdx, ok, i = intValue(data, i)
		case fieldSummaryIndex:
			sumIdx, ok, i = intValue(data, i)
		case fieldTyped:
			return Event{}, false
		default:
			j := skipValue(data, i)
			if j < 0 || !validSkipped(data[i:j]) {
				return Event{}, false
			}
			i, ok = j, true
		}
		if !ok || i < 0 {
			return Event{}, false
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return Event{}, false
		}
		if data[i] == '}' {
			if skipSpace(data, i+1) != len(data) {
				return Event{}, false
			}
			break
		}
		if data[i] != ',' {
			return Event{}, false
		}
		i = skipSpace(data, i+1)
	}
	kind, known := fastKinds[string(typ)]
	if !known {
		return Event{}, false
	}
	ev := Event{Type: kind, OutputIndex: outIdx, ItemID: d.internItemID(itemID)}
	if deltaEsc {
		s, ok := unescape(delta)
		if !ok {
			return Event{}, false
		}
		ev.Delta = s
	} else {
		ev.Delta = string(delta)
	}
	switch kind {
	case EventReasoningDelta:
		ev.SummaryIndex = sumIdx
	case EventToolCallDelta:
		if c := d.call(ev.ItemID); c != nil {
			ev.CallID, ev.Name = c.callID, c.name
		}
	}
	return ev, true
}

// Fields the fast decoder distinguishes.
const (
	fieldOther = iota
	fieldType
	fieldItemID
	fieldDelta
	fieldOutputIndex
	fieldSummaryIndex
	// fieldTyped marks keys the general decoder type-checks (item,
	// response, code, message, error, status, status_code, headers) and
	// non-ASCII keys it may fold onto them; a delta event carrying one
	// takes the general path so both agree on errors.
	fieldTyped
)

// fieldOf classifies a key the way encoding/json matches struct fields:
// exactly, else ASCII case-insensitively.
func fieldOf(key []byte) int {
	if f := fieldExact(string(key)); f != fieldOther {
		return f
	}
	for _, c := range key {
		if c >= 0x80 {
			// encoding/json also folds non-ASCII runes ("ſ" matches "s",
			// "K" matches "k"); leave such keys to the general decoder.
			return fieldTyped
		}
	}
	if len(key) > 16 {
		return fieldOther
	}
	var buf [16]byte
	lower := buf[:len(key)]
	changed := false
	for i, c := range key {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
			changed = true
		}
		lower[i] = c
	}
	if !changed {
		return fieldOther
	}
	return fieldExact(string(lower))
}

func fieldExact(k string) int {
	switch k {
	case "type":
		return fieldType
	case "item_id":
		return fieldItemID
	case "delta":
		return fieldDelta
	case "output_index":
		return fieldOutputIndex
	case "summary_index":
		return fieldSummaryIndex
	case "item", "response", "code", "message", "error", "status", "status_code", "headers":
		return fieldTyped
	}
	return fieldOther
}

// validSkipped validates a skipped value cheaply for the common shapes
// (escape-free strings, numbers, literals, empty containers) and with
// json.Valid otherwise.
func validSkipped(v []byte) bool {
	switch {
	case len(v) == 0:
		return false
	case v[0] == '"':
		_, esc, next := scanString(v, 0)
		return next == len(v) && (!esc || json.Valid(v))
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		return validNumber(v)
	}
	switch string(v) {
	case "true", "false", "null", "[]", "{}":
		return true
	}
	return json.Valid(v)
}

// validNumber checks the JSON number grammar.
func validNumber(v []byte) bool {
	i := 0
	if v[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(v) && v[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(v)
}

// internItemID reuses the previous item id string when it repeats.
func (d *decoder) internItemID(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == d.lastItemID {
		return d.lastItemID
	}
	d.lastItemID = string(b)
	return d.lastItemID
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the raw contents of the string starting at b[i]=='"',
// whether it has escapes, and the index after the closing quote (-1 if
// unterminated or holding a raw control character). Escapes are validated
// by whoever decodes them.
func scanString(b []byte, i int) ([]byte, bool, int) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			esc = true
			j++
		case c == '"':
			return b[i+1 : j], esc, j + 1
		case c < 0x20:
			return nil, false, -1
		}
	}
	return nil, false, -1
}

// stringValue reads an escape-free string value.
func stringValue(b []byte, i int, allowEsc bool) ([]byte, bool, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, i
	}
	s, esc, next := scanString(b, i)
	if next < 0 || (esc && !allowEsc) {
		return nil, false, i
	}
	return s, true, next
}

// intValue reads a JSON integer that fits an int.
func intValue(b []byte, i int) (int, bool, int) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == start || j-start > 15 {
		return 0, false, i
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') || !validNumber(b[i:j]) {
		return 0, false, i
	}
	n, err := strconv.Atoi(string(b[i:j]))
	if err != nil {
		return 0, false, i
	}
	return n, true, j
}

// skipValue finds the end of one JSON value; the caller validates the span.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		_, _, next := scanString(b, i)
		return next
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, _, next := scanString(b, j)
				if next < 0 {
					return -1
				}
				j = next - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// unescape decodes the contents of a JSON string with escapes, replacing
// invalid surrogates with U+FFFD as encoding/json does.
func unescape(s []byte) (string, bool) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			if c < 0x20 {
				return "", false
			}
			out = append(out, c)
			continue
		}
		i++
		if i >= len(s) {
			return "", false
		}
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if r2, ok := hex4(s, i+3); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
