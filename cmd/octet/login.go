package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/octet-agent/octet/internal/config"
)

const loginSynopsis = "octet login   (asks for an OpenAI API key without echoing it and saves it in octet's credentials file)"

// runLogin is `octet login`: the key is read from the terminal with echo
// off (or, when stdin is not a terminal, as one line of stdin: printf %s
// "$KEY" | octet login) and written to $OCTET_HOME/credentials, private
// to the user. ACP clients run it as their terminal authentication.
func runLogin(ctx context.Context, args []string, e env) error {
	if _, err := parseSub(newFlagSet("login", loginSynopsis, e.stdout), loginSynopsis, args, 0); err != nil {
		return err
	}
	home, err := config.HomeDir(e.lookup)
	if err != nil {
		return err
	}
	key, err := readKey(ctx, e)
	if errors.Is(err, errNoKey) {
		return usageErrorf("%v", err)
	}
	if err != nil {
		return err
	}
	if err := config.CheckKey(key); err != nil {
		return usageErrorf("login: %v", err)
	}
	path, err := config.SaveCredentials(home, config.NewSecret(key))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Saved the key in %s (private to you).\n", visible(path))
	if v, ok := e.lookup("OPENAI_API_KEY"); ok && strings.TrimSpace(v) != "" {
		fmt.Fprintln(e.stderr, "octet: warning: OPENAI_API_KEY is set in this environment; octet uses it rather than the saved key")
	}
	return nil
}

// readKey reads the key: on the terminal, after a prompt, with echo off;
// otherwise one line of stdin. It never writes the key anywhere.
func readKey(ctx context.Context, e env) (string, error) {
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
	fmt.Fprint(tty, "OpenAI API key (not shown as you type): ")
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
