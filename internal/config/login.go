package config

import (
	"errors"
	"fmt"
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

// SaveCredentials writes key as the credentials file in home (creating
// home, private to the user, when it does not exist) and returns its
// path. The file is written whole under a temporary name created private
// to the user (on Unix mode 0600, on Windows a protected DACL granting
// only the user), synced and renamed over the old one, so a reader sees
// the old key or the new one, never a partial file, and the key is never
// readable by anyone else, not even for a moment. The other providers'
// keys of the old file ([api_keys]) are kept. It is read back with
// LoadCredentials's own checks.
func SaveCredentials(home string, key Secret) (string, error) {
	if err := CheckKey(key.Reveal()); err != nil {
		return "", err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", home, err)
	}
	path := CredentialsPath(home)
	tmp, err := createPrivate(filepath.Join(home, ".credentials-new"))
	if err != nil {
		return "", fmt.Errorf("create the credentials file in %s: %w", home, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // gone after the rename; removes a failed write
	body := "# Written by octet login.\nopenai_api_key = " + tomlString(key.Reveal()) + "\n"
	if old, err := readCredentialsFile(path); err == nil && len(old.keys) > 0 {
		body += "\n[api_keys]\n"
		for _, name := range slices.Sorted(maps.Keys(old.keys)) {
			body += name + " = " + tomlString(old.keys[name].Reveal()) + "\n"
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
	got, err := readCredentialsFile(path)
	if err != nil {
		return "", err
	}
	if got.openai.Reveal() != key.Reveal() {
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
