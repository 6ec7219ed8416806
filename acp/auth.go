package acp

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/octet-agent/octet/host"
)

// codeAuthRequired is ACP's auth_required error: session/new (and load,
// resume) until the client has the person log in.
const codeAuthRequired = -32000

// Authentication method ids.
const (
	// authCredentials re-reads octet's credentials (OPENAI_API_KEY, the
	// credentials file octet login writes): the client calls
	// authenticate with it after the person logged in some other way.
	authCredentials = "octet-credentials"
	// authLogin is the terminal method: the client runs `octet login`
	// in a terminal and never passes it to authenticate.
	authLogin = "octet-login"
)

// authMethods are the methods initialize advertises: the terminal login
// to a client that can run one, and re-reading the credentials to all.
func authMethods(caps clientCapabilities) []map[string]any {
	var ms []map[string]any
	if caps.Auth.Terminal {
		ms = append(ms, map[string]any{
			"type": "terminal", "id": authLogin, "name": "Log in with an API key",
			"description": "Runs octet login, which asks for the selected provider's API key (OpenAI's unless model_provider names another) without echoing it and saves it in octet's credentials file, private to you.",
			"args":        []string{"login"},
		})
	}
	return append(ms, map[string]any{
		"id": authCredentials, "name": "Use the key octet login saved",
		"description": "Reads the provider's API key again: its variable (OPENAI_API_KEY for OpenAI), or the credentials file `octet login` writes (run it in a terminal first).",
	})
}

// authRequired is the auth_required error for err (a missing key).
func authRequired(err error) error {
	return &rpcError{Code: codeAuthRequired, Message: err.Error() + " (authenticate with " + authCredentials + " once a key is saved)"}
}

// authenticate handles authenticate: the credentials are read again;
// while there are still none the answer is auth_required.
func (s *Server) authenticate(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		MethodID string `json:"methodId"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	switch p.MethodID {
	case authCredentials:
	case authLogin:
		return nil, invalidParams("%s is a terminal method: run octet login in a terminal, then authenticate with %s", authLogin, authCredentials)
	default:
		return nil, invalidParams("unknown authentication method %q (octet offers %s)", truncate(p.MethodID, 80), authCredentials)
	}
	if s.opts.Runtime.Authenticate == nil {
		return struct{}{}, nil
	}
	err := s.opts.Runtime.Authenticate(ctx)
	switch {
	case errors.Is(err, host.ErrAuthRequired):
		return nil, authRequired(err)
	case err != nil:
		return nil, err
	}
	s.log.Info("credentials read again")
	return struct{}{}, nil
}
