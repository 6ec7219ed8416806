package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// canonicalizer is the single-pass canonical encoder behind
// CanonicalArguments. It validates the JSON grammar itself and copies
// string and number literals that are already canonical, so a large
// write call is not decoded token by token. FuzzCanonicalEquivalence
// checks it against the encoding/json token reference (canonicalReference).
type canonicalizer struct {
	in  []byte
	pos int
}

var errSyntax = errors.New("invalid JSON")

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.pos to out.
func (c *canonicalizer) value(out []byte, depth int) ([]byte, error) {
	c.skipSpace()
	if c.pos >= len(c.in) {
		return nil, fmt.Errorf("%w: unexpected end", errSyntax)
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		if depth >= maxArgumentDepth {
			return nil, fmt.Errorf("nesting deeper than %d", maxArgumentDepth)
		}
		return c.object(out, depth+1)
	case b == '[':
		if depth >= maxArgumentDepth {
			return nil, fmt.Errorf("nesting deeper than %d", maxArgumentDepth)
		}
		return c.array(out, depth+1)
	case b == '"':
		s, _, err := c.str(out, false)
		return s, err
	case b == 't':
		return c.literal(out, "true")
	case b == 'f':
		return c.literal(out, "false")
	case b == 'n':
		return c.literal(out, "null")
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number(out)
	}
	return nil, fmt.Errorf("%w: unexpected %q at offset %d", errSyntax, c.in[c.pos], c.pos)
}

func (c *canonicalizer) literal(out []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return nil, fmt.Errorf("%w: bad literal at offset %d", errSyntax, c.pos)
	}
	c.pos += len(lit)
	return append(out, lit...), nil
}

// number copies a number literal after checking the JSON number grammar.
func (c *canonicalizer) number(out []byte) ([]byte, error) {
	start := c.pos
	digits := func() int {
		n := 0
		for c.pos < len(c.in) && c.in[c.pos] >= '0' && c.in[c.pos] <= '9' {
			c.pos++
			n++
		}
		return n
	}
	if c.in[c.pos] == '-' {
		c.pos++
	}
	if c.pos < len(c.in) && c.in[c.pos] == '0' {
		c.pos++
	} else if digits() == 0 {
		return nil, fmt.Errorf("%w: bad number at offset %d", errSyntax, start)
	}
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		if digits() == 0 {
			return nil, fmt.Errorf("%w: bad number at offset %d", errSyntax, start)
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		if digits() == 0 {
			return nil, fmt.Errorf("%w: bad number at offset %d", errSyntax, start)
		}
	}
	return append(out, c.in[start:c.pos]...), nil
}

// str appends the canonical encoding of the string at c.pos and, when
// key is set, returns its decoded value too (object keys are compared
// decoded). A literal whose only escapes are the ones the canonical
// encoder itself writes (\" \\ \n \r \t) and that has no U+2028/U+2029 is
// already canonical and is copied; anything else is decoded and
// re-encoded.
func (c *canonicalizer) str(out []byte, key bool) ([]byte, string, error) {
	start := c.pos
	c.pos++ // opening quote
	plain, escaped := true, false
	for {
		if c.pos >= len(c.in) {
			return nil, "", fmt.Errorf("%w: unterminated string at offset %d", errSyntax, start)
		}
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			raw := c.in[start:c.pos]
			if plain && !escaped {
				return append(out, raw...), string(raw[1 : len(raw)-1]), nil
			}
			if plain && !key {
				return append(out, raw...), "", nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, "", fmt.Errorf("%w: bad string at offset %d", errSyntax, start)
			}
			if plain {
				return append(out, raw...), s, nil
			}
			var buf bytes.Buffer
			writeJSONString(&buf, s)
			return append(out, buf.Bytes()...), s, nil
		case b == '\\':
			escaped = true
			if c.pos+1 >= len(c.in) || strings.IndexByte(`"\nrt`, c.in[c.pos+1]) < 0 {
				plain = false // validated and normalized by json.Unmarshal
			}
			c.pos += 2
		case b < 0x20:
			return nil, "", fmt.Errorf("%w: control character in string at offset %d", errSyntax, c.pos)
		case b == 0xe2 && c.pos+2 < len(c.in) && c.in[c.pos+1] == 0x80 && (c.in[c.pos+2] == 0xa8 || c.in[c.pos+2] == 0xa9):
			plain = false // U+2028/U+2029 are escaped in canonical form
			c.pos += 3
		default:
			c.pos++
		}
	}
}

type canonKV struct {
	key string
	enc []byte // canonical "key":value
}

// object canonicalizes an object at c.pos ('{').
func (c *canonicalizer) object(out []byte, depth int) ([]byte, error) {
	c.pos++
	var members []canonKV
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		return append(out, "{}"...), nil
	}
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return nil, fmt.Errorf("%w: expected object key at offset %d", errSyntax, c.pos)
		}
		enc, key, err := c.str(nil, true)
		if err != nil {
			return nil, err
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return nil, fmt.Errorf("%w: expected ':' at offset %d", errSyntax, c.pos)
		}
		c.pos++
		enc = append(enc, ':')
		if enc, err = c.value(enc, depth); err != nil {
			return nil, err
		}
		members = append(members, canonKV{key, enc})
		c.skipSpace()
		if c.pos >= len(c.in) {
			return nil, fmt.Errorf("%w: unterminated object", errSyntax)
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return nil, fmt.Errorf("%w: expected ',' or '}' at offset %d", errSyntax, c.pos)
		}
		c.pos++
		break
	}
	slices.SortFunc(members, func(a, b canonKV) int { return strings.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			if m.key == members[i-1].key {
				return nil, fmt.Errorf("duplicate key %q", truncateForError(m.key))
			}
			out = append(out, ',')
		}
		out = append(out, m.enc...)
	}
	return append(out, '}'), nil
}

// array canonicalizes an array at c.pos ('[').
func (c *canonicalizer) array(out []byte, depth int) ([]byte, error) {
	c.pos++
	out = append(out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		return append(out, ']'), nil
	}
	for {
		var err error
		if out, err = c.value(out, depth); err != nil {
			return nil, err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return nil, fmt.Errorf("%w: unterminated array", errSyntax)
		}
		if c.in[c.pos] == ',' {
			c.pos++
			out = append(out, ',')
			continue
		}
		if c.in[c.pos] != ']' {
			return nil, fmt.Errorf("%w: expected ',' or ']' at offset %d", errSyntax, c.pos)
		}
		c.pos++
		return append(out, ']'), nil
	}
}
