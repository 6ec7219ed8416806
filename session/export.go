package session

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Redacted replaces every secret Export removes.
const Redacted = "[REDACTED]"

// Export writes the session's complete records as JSONL with secrets
// redacted, preserving record order, key order and unknown kinds. A torn
// tail is left out. What counts as a secret:
//
//   - the whole value of any object member whose key, lower-cased and
//     stripped of "_" and "-", ends in "token", "secret" or "accesskey",
//     contains "password", "passwd", "apikey" or "privatekey", or is
//     "authorization", "proxyauthorization", "cookie", "setcookie",
//     "credential" or "credentials" (at any depth, including tool result
//     details);
//   - inside every string (message text, tool arguments and results): API
//     keys shaped like OpenAI "sk-…", GitHub "ghp_…"/"github_pat_…", Slack
//     "xox?-…", AWS "AKIA…" and Google "AIza…" keys, "Bearer …" credentials,
//     the credential of any "Authorization:"/"Proxy-Authorization:" header
//     text (with or without a scheme such as "Basic"),
//     PEM private key blocks, and the value in "name=value" or "name: value"
//     text whose name contains api_key, apikey, secret, token, password or
//     authorization (values of at least 8 characters).
//
// Opaque reasoning content is kept: it is provider ciphertext, not a user
// secret, and redacting it would break replay of an exported session.
func Export(path string, w io.Writer) error {
	s, err := open(path, true, false)
	if err != nil {
		return fmt.Errorf("export session: %w", err)
	}
	defer s.Close()
	bw := bufio.NewWriterSize(w, 1<<16)
	lr := newLineReader(s.f.ReadAt, 0, s.size, limits.recordBytes)
	var out []byte
	for n := 1; ; n++ {
		line, off, _, ok, err := lr.next()
		if err != nil {
			return fmt.Errorf("export session %s: %w", path, err)
		}
		if !ok {
			break
		}
		d := decoder{b: line}
		out = d.redact(out[:0], false, 0)
		d.end()
		if d.err != nil {
			return &CorruptError{Path: path, Line: n, Offset: off, Err: d.err}
		}
		out = append(out, '\n')
		if _, err := bw.Write(out); err != nil {
			return fmt.Errorf("export session %s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export session %s: %w", path, err)
	}
	return nil
}

// redact re-encodes the next value into out, redacting secrets. Inside a
// sensitive member every scalar is replaced.
func (d *decoder) redact(out []byte, sensitive bool, depth int) []byte {
	if d.err != nil {
		return out
	}
	if depth > maxDepth {
		d.err = &syntaxError{msg: "nesting too deep", off: d.i, kind: errSchema}
		return out
	}
	switch d.peek() {
	case '{':
		out = append(out, '{')
		first := true
		d.obj(func(key []byte) {
			if !first {
				out = append(out, ',')
			}
			first = false
			k := string(key)
			out = appendString(out, k)
			out = append(out, ':')
			if k == "encrypted_content" && !sensitive {
				out = append(out, d.raw()...)
				return
			}
			out = d.redact(out, sensitive || sensitiveKey(k), depth+1)
		})
		return append(out, '}')
	case '[':
		out = append(out, '[')
		first := true
		d.arr(func() {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = d.redact(out, sensitive, depth+1)
		})
		return append(out, ']')
	case '"':
		s := string(d.strBytes())
		if sensitive && s != "" {
			return appendString(out, Redacted)
		}
		return appendString(out, redactText(s))
	default:
		raw := d.raw()
		if sensitive && string(raw) != "null" {
			return appendString(out, Redacted)
		}
		return append(out, raw...)
	}
}

// sensitiveKey reports whether a member named key holds a secret.
func sensitiveKey(key string) bool {
	k := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(key))
	switch k {
	case "authorization", "proxyauthorization", "cookie", "setcookie", "credential", "credentials":
		return true
	}
	return strings.HasSuffix(k, "token") || strings.HasSuffix(k, "secret") || strings.HasSuffix(k, "accesskey") ||
		strings.Contains(k, "password") || strings.Contains(k, "passwd") ||
		strings.Contains(k, "apikey") || strings.Contains(k, "privatekey")
}

var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`), Redacted},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`), Redacted},
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), Redacted},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9\-]{10,}`), Redacted},
	{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), Redacted},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`), Redacted},
	{regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*`), "Bearer " + Redacted},
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?)([A-Za-z][A-Za-z0-9_\-]*\s+)?[^\s"',;&]+`), "${1}${2}" + Redacted},
	{regexp.MustCompile(`(?i)\b([A-Za-z0-9_\-]*(?:api[_\-]?key|secret|token|password|passwd|authorization)[A-Za-z0-9_\-]*)(["']?\s*[:=]\s*["']?)([^\s"',;&]{8,})`), "${1}${2}" + Redacted},
}

// redactText removes secret-shaped substrings from s.
func redactText(s string) string {
	if len(s) < 8 {
		return s
	}
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}
