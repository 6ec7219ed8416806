package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// Secret holds a credential. Every formatting path (fmt verbs, JSON, text,
// slog) prints "[redacted]"; only Reveal returns the value, for the one
// place that sends it (the provider's Authorization header).
type Secret struct{ v string }

// NewSecret wraps a credential value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the secret value. Never log or print it.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

// String redacts the secret.
func (s Secret) String() string { return "[redacted]" }

// GoString redacts the secret under %#v.
func (s Secret) GoString() string { return "config.Secret([redacted])" }

// Format redacts the secret under every verb.
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, "[redacted]") }

// MarshalText redacts the secret in JSON and TOML.
func (s Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

var (
	_ fmt.Formatter  = Secret{}
	_ slog.LogValuer = Secret{}
)

// Credentials are the provider credentials and where they came from.
type Credentials struct {
	// APIKey is the OpenAI API key.
	APIKey Secret
	// From says where the key came from: "OPENAI_API_KEY" or the file path.
	From string
}

// MaxCredentialsBytes bounds the credentials file.
const MaxCredentialsBytes = 64 << 10

// CredentialsPath is the credentials file inside home.
func CredentialsPath(home string) string { return filepath.Join(home, "credentials") }

// MissingKeyError says no API key was found and where octet looked.
type MissingKeyError struct{ Path string }

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("no OpenAI API key: run octet login, set OPENAI_API_KEY, or write openai_api_key = \"sk-...\" to %s and %s (octet demo needs no key)", e.Path, privateHint(e.Path))
}

// ModeError refuses a credentials file that others can read or write.
type ModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("credentials file %s has mode %04o; it must be private to you (0600): run chmod 600 %s", e.Path, e.Mode.Perm(), e.Path)
}

// ACLError refuses (on Windows) a credentials file whose security descriptor lets
// someone other than the user (and SYSTEM and Administrators) read or
// change it.
type ACLError struct {
	Path string
	// Why names the problem: the accounts granted access, a missing
	// DACL, or a foreign owner.
	Why string
}

func (e *ACLError) Error() string {
	return fmt.Sprintf("credentials file %s is not private to you (%s): %s", e.Path, e.Why, privateHint(e.Path))
}

// LoadCredentials returns the API key from OPENAI_API_KEY, else from
// $OCTET_HOME/credentials (TOML: openai_api_key = "..."), which must be a
// regular file private to the user: on Unix mode 0600 (no group or other
// bits, else *ModeError); on Windows a DACL that grants access only to the
// user, SYSTEM and Administrators (else *ACLError). Errors never contain
// the key.
func LoadCredentials(home string, lookup func(string) (string, bool)) (Credentials, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if v, ok := lookup("OPENAI_API_KEY"); ok && strings.TrimSpace(v) != "" {
		return Credentials{APIKey: NewSecret(strings.TrimSpace(v)), From: "OPENAI_API_KEY"}, nil
	}
	path := CredentialsPath(home)
	key, err := readCredentialsFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, &MissingKeyError{Path: path}
	}
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{APIKey: key, From: path}, nil
}

func readCredentialsFile(path string) (Secret, error) {
	// Non-blocking, so a FIFO is refused below instead of hanging.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Secret{}, err
		}
		return Secret{}, fmt.Errorf("open credentials %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Secret{}, fmt.Errorf("stat credentials %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Secret{}, fmt.Errorf("credentials %s is not a regular file", path)
	}
	if err := checkPrivate(f, path, fi); err != nil {
		return Secret{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxCredentialsBytes+1))
	if err != nil {
		return Secret{}, fmt.Errorf("read credentials %s: %w", path, err)
	}
	if len(data) > MaxCredentialsBytes {
		return Secret{}, fmt.Errorf("credentials %s is larger than %d bytes", path, MaxCredentialsBytes)
	}
	var v struct {
		OpenAIAPIKey string `toml:"openai_api_key"`
	}
	md, err := toml.Decode(string(data), &v)
	if err != nil {
		// Never echo the parser's message: it may quote the secret.
		line := 0
		if pe, ok := errors.AsType[toml.ParseError](err); ok {
			line = pe.Position.Line
		}
		return Secret{}, &FileError{Path: path, Line: line, Msg: `not valid TOML; expected openai_api_key = "sk-..."`}
	}
	if und := md.Undecoded(); len(und) > 0 {
		return Secret{}, &FileError{Path: path, Line: keyLine(data, und[0]), Msg: "unknown key (not echoed, it may be a secret); the only key is openai_api_key"}
	}
	if strings.TrimSpace(v.OpenAIAPIKey) == "" {
		return Secret{}, &FileError{Path: path, Msg: `openai_api_key is missing or empty`}
	}
	return NewSecret(strings.TrimSpace(v.OpenAIAPIKey)), nil
}
