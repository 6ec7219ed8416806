package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/octet-agent/octet/internal/osfile"
)

// maxKeyBytes bounds an API key octet login takes.
const maxKeyBytes = 4096

// CheckKey refuses what cannot be an API key: nothing, or text with
// spaces or control characters (a pasted line break, a second word). The
// error never contains the key.
func CheckKey(key string) error {
	switch {
	case key == "":
		return errors.New("no key was entered")
	case len(key) > maxKeyBytes:
		return fmt.Errorf("the key is longer than %d bytes; paste only the key", maxKeyBytes)
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return errors.New("the key contains spaces or control characters; paste only the key")
	}
	return nil
}

// SaveCredentials writes key as the credentials file's entry (a
// provider's credentials: "openai" is openai_api_key, any other an
// [api_keys] entry) in home (creating home, private to the user, when it
// does not exist) and returns the file's path. The file is written whole
// under a temporary name created private to the user (on Unix mode 0600,
// on Windows a protected DACL granting only the user), synced and renamed
// over the old one, so a reader sees the old key or the new one, never a
// partial file, and the key is never readable by anyone else, not even
// for a moment. The old file's other keys are kept. It is read back with
// LoadCredentials's own checks. An old file that cannot be read (unsafe
// mode, not TOML) is left as it is and nothing is saved.
func SaveCredentials(home, entry string, key Secret) (string, error) {
	if err := CheckKey(key.Reveal()); err != nil {
		return "", err
	}
	if !providerName.MatchString(entry) {
		return "", fmt.Errorf("%q is not a credentials entry name (letters, digits, '-' and '_')", entry)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", home, err)
	}
	path := CredentialsPath(home)
	old, err := readCredentialsFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Writing over it would lose the keys it holds.
		return "", fmt.Errorf("the credentials file cannot be kept as it is, so nothing is saved: %w", err)
	}
	openai, keys := old.openai, maps.Clone(old.keys)
	if keys == nil {
		keys = map[string]Secret{}
	}
	if entry == "openai" {
		// An [api_keys] openai entry would win over openai_api_key.
		openai = key
		delete(keys, entry)
	} else {
		keys[entry] = key
	}
	tmp, err := createPrivate(filepath.Join(home, ".credentials-new"))
	if err != nil {
		return "", fmt.Errorf("create the credentials file in %s: %w", home, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // gone after the rename; removes a failed write
	body := "# Written by octet login.\n"
	if !openai.IsZero() {
		body += "openai_api_key = " + tomlString(openai.Reveal()) + "\n"
	}
	if len(keys) > 0 {
		body += "\n[api_keys]\n"
		for _, name := range slices.Sorted(maps.Keys(keys)) {
			body += name + " = " + tomlString(keys[name].Reveal()) + "\n"
		}
	}
	_, err = tmp.WriteString(body)
	if err == nil {
		err = osfile.Sync(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the credentials file in %s: %w", home, err)
	}
	if err := os.Rename(name, path); err != nil {
		return "", fmt.Errorf("replace %s: %w", path, err)
	}
	if err := osfile.SyncDir(home); err != nil {
		return "", fmt.Errorf("sync %s: %w", home, err)
	}
	got, _, err := LoadProviderKey(home, Provider{Name: entry, Credentials: entry}, func(string) (string, bool) { return "", false })
	if err != nil {
		return "", err
	}
	if got.Reveal() != key.Reveal() {
		return "", fmt.Errorf("%s does not hold the key just written: check the file", path)
	}
	return path, nil
}

// tomlString is s as a TOML basic string: quotes and backslashes are
// escaped, and so is any control character (a checked key has none; a
// kept [api_keys] value might).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
