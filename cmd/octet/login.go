package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/session"
)

const loginSynopsis = "octet login [--provider NAME]   (asks for the selected provider's API key without echoing it and saves it in octet's credentials file)"

// runLogin is `octet login`: the key of the selected provider (or of
// --provider NAME) is read from the terminal with echo off (or, when
// stdin is not a terminal, as one line of stdin: printf %s "$KEY" | octet
// login) and written to $OCTET_HOME/credentials, private to the user, as
// that provider's credentials entry (OpenAI's openai_api_key, another's
// [api_keys] entry). ACP clients run it as their terminal
// authentication.
func runLogin(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("login", loginSynopsis, e.stdout)
	name := fs.String("provider", "", "save the key of provider `NAME` (a preset or a [model_providers.NAME] table) instead of model_provider's")
	if _, err := parseSub(fs, loginSynopsis, args, 0); err != nil {
		return err
	}
	p, home, err := loginProvider(e, *name)
	if err != nil {
		return err
	}
	key, err := readKey(ctx, e, keyName(p))
	if errors.Is(err, errNoKey) {
		return usageErrorf("%v", err)
	}
	if err != nil {
		return err
	}
	if err := config.CheckKey(key); err != nil {
		return usageErrorf("login: %v", err)
	}
	path, err := config.SaveCredentials(home, p.Credentials, config.NewSecret(key))
	if err != nil {
		if advice := session.WriteFailureAdvice(err); advice != "" {
			return fmt.Errorf("%w (%s)", err, advice)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "Saved the %s in %s (private to you).\n", keyName(p), visible(path))
	if v, ok := e.lookup(p.EnvKey); ok && p.EnvKey != "" && strings.TrimSpace(v) != "" {
		fmt.Fprintf(e.stderr, "octet: warning: %s is set in this environment; octet uses it rather than the saved key\n", p.EnvKey)
	}
	return nil
}

// loginProvider is the provider whose key octet login saves (name, or
// the global configuration's model_provider) and octet's home. A
// provider without a credentials entry is a usage error saying where its
// key comes from instead.
func loginProvider(e env, name string) (config.Provider, string, error) {
	cfg, err := config.Load(config.Options{LookupEnv: e.lookup})
	if err != nil {
		return config.Provider{}, "", err
	}
	p := cfg.Provider()
	if name != "" {
		var ok bool
		if p, ok = cfg.Providers[name]; !ok {
			return p, "", usageErrorf("login: no provider %q: the presets are %s, and [model_providers.NAME] tables of %s add more",
				visible(name), strings.Join(slices.Sorted(maps.Keys(config.ProviderPresets())), ", "), filepath.Join(cfg.Home, "config.toml"))
		}
	}
	switch {
	case p.Credentials != "":
		return p, cfg.Home, nil
	case p.EnvKey != "":
		return p, "", usageErrorf("login: provider %s takes its key from %s only; set it, or add credentials = %q to [model_providers.%s] to keep the key in octet's credentials file", p.Name, p.EnvKey, p.Name, p.Name)
	}
	return p, "", usageErrorf("login: provider %s needs no key (it has neither env_key nor credentials)", p.Name)
}

// keyName names provider p's key for people: "OpenAI API key", "API key
// of provider anthropic".
func keyName(p config.Provider) string {
	if p.Credentials == "openai" {
		return "OpenAI API key"
	}
	return "API key of provider " + p.Name
}

// readKey reads the key: on the terminal, after a prompt, with echo off;
// otherwise one line of stdin. It never writes the key anywhere.
func readKey(ctx context.Context, e env, what string) (string, error) {
	if !e.stdinIsTerminal {
		line, err := readSecretLine(e.stdin)
		if err != nil {
			return "", fmt.Errorf("login: read the key from stdin: %w", err)
		}
		return line, nil
	}
	if e.tty == nil {
		return "", errors.New("login: no terminal to ask on; pipe the key to stdin instead")
	}
	tty, err := e.tty()
	if err != nil {
		return "", fmt.Errorf("login: open the terminal: %w", err)
	}
	defer tty.Close()
	// Echo goes off before the prompt shows: a key typed (or pasted) as
	// soon as the prompt appears is not shown either.
	restore, err := noEcho(tty)
	if err != nil {
		return "", fmt.Errorf("login: cannot turn off the terminal's echo, so the key is not asked for there (%w); pipe it to stdin instead", err)
	}
	fmt.Fprintf(tty, "%s (not shown as you type): ", what)
	type read struct {
		line string
		err  error
	}
	done := make(chan read, 1)
	go func() {
		line, err := readSecretLine(tty)
		done <- read{line, err}
	}()
	var r read
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	restore()
	fmt.Fprintln(tty)
	if r.err != nil {
		return "", fmt.Errorf("login: read the key: %w", r.err)
	}
	return r.line, nil
}

// errNoKey is reading nothing where the key was asked for.
var errNoKey = errors.New("no key was entered (paste it at the prompt, or pipe it to stdin)")

// readSecretLine reads one line (at most 8 KiB) without its line ending
// or surrounding blanks.
func readSecretLine(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, 8<<10), 8<<10)
	line, err := br.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", errNoKey
		}
		return "", err
	}
	return strings.TrimSpace(line), nil
}
