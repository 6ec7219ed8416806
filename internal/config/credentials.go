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
	// Keys are the credentials file's [api_keys] entries, by name: the
	// keys a provider's credentials entry names.
	Keys map[string]Secret
}

// MaxCredentialsBytes bounds the credentials file.
const MaxCredentialsBytes = 64 << 10

// CredentialsPath is the credentials file inside home.
func CredentialsPath(home string) string { return filepath.Join(home, "credentials") }

// MissingKeyError says no API key was found and where octet looked.
type MissingKeyError struct {
	Path string
	// Provider, EnvKey and Entry name the provider whose key is missing
	// and where it may come from; empty Provider is OpenAI's.
	Provider, EnvKey, Entry string
}

func (e *MissingKeyError) Error() string {
	if e.Provider == "" || e.Provider == "openai" && e.EnvKey == "OPENAI_API_KEY" && e.Entry == "openai" {
		return fmt.Sprintf("no OpenAI API key: run octet login, set OPENAI_API_KEY, or write openai_api_key = \"sk-...\" to %s and %s (octet demo needs no key)", e.Path, privateHint(e.Path))
	}
	var where []string
	if e.Entry != "" {
		where = append(where, "run octet login")
	}
	if e.EnvKey != "" {
		where = append(where, "set "+e.EnvKey)
	}
	if e.Entry != "" {
		where = append(where, fmt.Sprintf("write %s = \"...\" under [api_keys] in %s and %s", e.Entry, e.Path, privateHint(e.Path)))
	}
	return fmt.Sprintf("no API key for provider %s: %s", e.Provider, strings.Join(where, ", or "))
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
	f, err := readCredentialsFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, &MissingKeyError{Path: path}
	}
	if err != nil {
		return Credentials{}, err
	}
	if f.openai.IsZero() {
		return Credentials{Keys: f.keys}, &MissingKeyError{Path: path}
	}
	return Credentials{APIKey: f.openai, From: path, Keys: f.keys}, nil
}

// LoadProviderKey returns the key of provider p and where it came from:
// the environment variable p.EnvKey when it is set, else the credentials
// file's entry p.Credentials ([api_keys] NAME; for the entry "openai"
// also openai_api_key), read as LoadCredentials reads the file. A
// provider with neither source needs no key: (zero, "", nil). Errors
// never contain a key.
func LoadProviderKey(home string, p Provider, lookup func(string) (string, bool)) (Secret, string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if p.EnvKey == "" && p.Credentials == "" {
		return Secret{}, "", nil
	}
	if p.EnvKey != "" {
		if v, ok := lookup(p.EnvKey); ok && strings.TrimSpace(v) != "" {
			return NewSecret(strings.TrimSpace(v)), p.EnvKey, nil
		}
	}
	path := CredentialsPath(home)
	missing := &MissingKeyError{Path: path, Provider: p.Name, EnvKey: p.EnvKey, Entry: p.Credentials}
	if p.Credentials == "" {
		return Secret{}, "", missing
	}
	f, err := readCredentialsFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Secret{}, "", missing
	}
	if err != nil {
		return Secret{}, "", err
	}
	if k, ok := f.keys[p.Credentials]; ok {
		return k, path, nil
	}
	if p.Credentials == "openai" && !f.openai.IsZero() {
		return f.openai, path, nil
	}
	return Secret{}, "", missing
}

// KnownKeys returns every provider key octet can find without a
// configuration, for redaction: the values of the presets' key
// variables and every key of the credentials file (an unreadable or
// unsafe file contributes none).
func KnownKeys(home string, lookup func(string) (string, bool)) []Secret {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var out []Secret
	for _, p := range ProviderPresets() {
		if v, ok := lookup(p.EnvKey); ok && p.EnvKey != "" && strings.TrimSpace(v) != "" {
			out = append(out, NewSecret(strings.TrimSpace(v)))
		}
	}
	if f, err := readCredentialsFile(CredentialsPath(home)); err == nil {
		if !f.openai.IsZero() {
			out = append(out, f.openai)
		}
		for _, k := range f.keys {
			out = append(out, k)
		}
	}
	return out
}

// credentialsFile is a parsed credentials file.
type credentialsFile struct {
	openai Secret
	keys   map[string]Secret
}

func readCredentialsFile(path string) (credentialsFile, error) {
	// Non-blocking, so a FIFO is refused below instead of hanging.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return credentialsFile{}, err
		}
		return credentialsFile{}, fmt.Errorf("open credentials %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return credentialsFile{}, fmt.Errorf("stat credentials %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return credentialsFile{}, fmt.Errorf("credentials %s is not a regular file", path)
	}
	if err := checkPrivate(f, path, fi); err != nil {
		return credentialsFile{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxCredentialsBytes+1))
	if err != nil {
		return credentialsFile{}, fmt.Errorf("read credentials %s: %w", path, err)
	}
	if len(data) > MaxCredentialsBytes {
		return credentialsFile{}, fmt.Errorf("credentials %s is larger than %d bytes", path, MaxCredentialsBytes)
	}
	var v struct {
		OpenAIAPIKey string            `toml:"openai_api_key"`
		APIKeys      map[string]string `toml:"api_keys"`
	}
	md, err := toml.Decode(string(data), &v)
	if err != nil {
		// Never echo the parser's message: it may quote the secret.
		line := 0
		if pe, ok := errors.AsType[toml.ParseError](err); ok {
			line = pe.Position.Line
		}
		return credentialsFile{}, &FileError{Path: path, Line: line, Msg: `not valid TOML; expected openai_api_key = "sk-..." or an [api_keys] table of name = "key"`}
	}
	if und := md.Undecoded(); len(und) > 0 {
		return credentialsFile{}, &FileError{Path: path, Line: keyLine(data, und[0]), Msg: "unknown key (not echoed, it may be a secret); the keys are openai_api_key and the [api_keys] table"}
	}
	cf := credentialsFile{openai: NewSecret(strings.TrimSpace(v.OpenAIAPIKey))}
	if md.IsDefined("openai_api_key") && cf.openai.IsZero() {
		return credentialsFile{}, &FileError{Path: path, Msg: `openai_api_key is empty`}
	}
	for name, k := range v.APIKeys {
		if !providerName.MatchString(name) {
			return credentialsFile{}, &FileError{Path: path, Line: keyLine(data, toml.Key{"api_keys"}), Msg: "an [api_keys] entry name (not echoed) is not letters, digits, '-' and '_'"}
		}
		if strings.TrimSpace(k) == "" {
			return credentialsFile{}, &FileError{Path: path, Line: keyLine(data, toml.Key{"api_keys"}), Msg: "an [api_keys] entry (not echoed) is empty"}
		}
		if cf.keys == nil {
			cf.keys = map[string]Secret{}
		}
		cf.keys[name] = NewSecret(strings.TrimSpace(k))
	}
	if cf.openai.IsZero() && len(cf.keys) == 0 {
		return credentialsFile{}, &FileError{Path: path, Msg: `no key in it: write openai_api_key = "sk-..." or an [api_keys] table of name = "key"`}
	}
	return cf, nil
}
