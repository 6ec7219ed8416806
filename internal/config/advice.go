package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// keyKind is the TOML type a config key expects.
type keyKind int

const (
	kindText keyKind = iota
	kindBool
	kindInt
	kindList
)

// keySpec says what a key holds, for advice on a value of the wrong type.
type keySpec struct {
	kind keyKind
	what string // what the value is, e.g. "a model name"
	// example is a valid value, shown when the given one cannot be turned
	// into one.
	example string
}

// keySpecs describes every top-level key of config.toml (validKeys);
// price fields are described by priceFieldSpec.
var keySpecs = map[string]keySpec{
	"model":                 {kindText, "a model name", `"gpt-5.1-codex"`},
	"reasoning":             {kindText, "a reasoning effort", `"medium"`},
	"reasoning_summary":     {kindText, "a reasoning summary mode (auto, concise, detailed or none)", `"auto"`},
	"apply_patch":           {kindText, "which models are offered apply_patch (auto, on or off)", `"auto"`},
	"effect_policy":         {kindText, "an effect policy name", `"controlled"`},
	"allow_external_paths":  {kindBool, "true or false", "false"},
	"allow_edit":            {kindBool, "true or false", "true"},
	"allow_write":           {kindBool, "true or false", "true"},
	"allow_process":         {kindBool, "true or false", "true"},
	"allow_shell":           {kindBool, "true or false", "true"},
	"shell_path":            {kindText, "an absolute path", `"/bin/bash"`},
	"bash_timeout_secs":     {kindInt, "a whole number of seconds", "120"},
	"max_output_bytes":      {kindInt, "a whole number of bytes", "51200"},
	"tools":                 {kindList, "a list of tool names", `["read", "search"]`},
	"sandbox":               {kindText, "a sandbox profile (read-only, workspace-write or none)", `"workspace-write"`},
	"sandbox_read_paths":    {kindList, "a list of absolute paths", `["/home/me/.cache/go-build"]`},
	"sandbox_write_paths":   {kindList, "a list of absolute paths or workspace entries", `["/home/me/go/pkg/mod", ".git"]`},
	"base_url":              {kindText, "a URL", `"https://api.openai.com/v1"`},
	"runtime_profile":       {kindText, "a runtime profile name", `"codex"`},
	"transport":             {kindText, "a transport name", `"http"`},
	"prewarm":               {kindBool, "true or false", "true"},
	"max_session_tokens":    {kindInt, "a whole number of tokens", "1000000"},
	"max_session_cost_usd":  {kindText, "an exact decimal amount of US dollars, written as a string", `"5"`},
	"max_network_wait_secs": {kindInt, "a whole number of seconds", "600"},
	"mcp_servers":           {kindText, "a table of MCP server tables", `{ docs = { command = "docs-mcp", enabled = true } }`},
	"max_retry_wait_secs":   {kindInt, "a whole number of seconds", "600"},
	"model_provider":        {kindText, "a provider name", `"anthropic"`},
	"model_providers":       {kindText, "a table of provider tables", `{ local = { base_url = "http://localhost:8080/v1", wire_api = "chat" } }`},
	"models":                {kindText, "a table of model tables", `{ "llama3.2" = { context_window = 131072 } }`},
}

// providerFieldSpecs describe the keys of [model_providers.NAME].
var providerFieldSpecs = map[string]keySpec{
	"base_url":                 {kindText, "a URL", `"http://localhost:8080/v1"`},
	"wire_api":                 {kindText, "a wire format (responses, chat or anthropic)", `"chat"`},
	"env_key":                  {kindText, "an environment variable name", `"MY_GATEWAY_KEY"`},
	"credentials":              {kindText, "an [api_keys] entry name of the credentials file", `"gateway"`},
	"key_header":               {kindText, "a key header (authorization, api-key or x-api-key)", `"api-key"`},
	"headers":                  {kindText, "a table of header names and values", `{ "X-Team" = "core" }`},
	"query_params":             {kindText, "a table of query parameter names and values", `{ api-version = "2025-04-01-preview" }`},
	"runtime_profile":          {kindText, "a runtime profile name", `"none"`},
	"stream_idle_timeout_secs": {kindInt, "a whole number of seconds", "300"},
	"open_timeout_secs":        {kindInt, "a whole number of seconds", "120"},
}

// modelFieldSpecs describe the keys of [models."NAME"].
var modelFieldSpecs = map[string]keySpec{
	"context_window":      {kindInt, "a whole number of tokens", "131072"},
	"max_output_tokens":   {kindInt, "a whole number of tokens", "8192"},
	"reasoning":           {kindBool, "true or false", "true"},
	"images":              {kindBool, "true or false", "true"},
	"parallel_tool_calls": {kindBool, "true or false", "true"},
	"native_steering":     {kindBool, "true or false", "true"},
	"native_compaction":   {kindBool, "true or false", "true"},
	"price":               {kindText, "a price table", `{ input = "0.15", cached_input = "0.075", output = "0.6" }`},
}

// mcpFieldSpecs describe the keys of [mcp_servers.NAME] (mcpKeys).
var mcpFieldSpecs = map[string]keySpec{
	"command":              {kindText, "a program to start", `"docs-mcp"`},
	"args":                 {kindList, "a list of arguments", `["--stdio"]`},
	"env":                  {kindText, "a table of variable names and values", `{ DOCS_DIR = "/srv/docs" }`},
	"cwd":                  {kindText, "an absolute path", `"/srv/docs"`},
	"url":                  {kindText, "a URL", `"https://mcp.example.com/mcp"`},
	"headers":              {kindText, "a table of header names and values", `{ "X-Team" = "core" }`},
	"bearer_token_env_var": {kindText, "an environment variable name", `"DOCS_TOKEN"`},
	"enabled":              {kindBool, "true or false", "true"},
	"startup_timeout_secs": {kindInt, "a whole number of seconds", "10"},
	"tool_timeout_secs":    {kindInt, "a whole number of seconds", "60"},
	"enabled_tools":        {kindList, "a list of tool names", `["search"]`},
	"disabled_tools":       {kindList, "a list of tool names", `["delete"]`},
	"sandbox":              {kindText, "a sandbox profile (read-only, workspace-write or none)", `"read-only"`},
}

// priceFieldSpec describes input, cached_input and output of [prices.<model>].
var priceFieldSpec = keySpec{kindText, "an exact decimal price in US dollars per million tokens, written as a string", `"1.25"`}

var incompatibleRE = regexp.MustCompile(`^incompatible types: TOML value has type (\S+); destination has type (\w+)$`)

// typeAdvice rewrites the decoder's "incompatible types" message for key
// (as the decoder names it, e.g. "prices.gpt-5.input") into what the key
// holds and what to write instead; line is the offending line's text. It
// returns "" for any other message.
func typeAdvice(key, msg, line string) string {
	m := incompatibleRE.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	spec, name, ok := specOf(key)
	if !ok {
		return ""
	}
	got := tomlTypeName(m[1])
	value := valueText(line)
	head := fmt.Sprintf("%s is %s, not %s", name, spec.what, got)
	switch spec.kind {
	case kindText:
		if m[1] == "int64" || m[1] == "float64" || m[1] == "bool" {
			return fmt.Sprintf("%s: quote it: %q", head, value)
		}
	case kindBool:
		if s, err := strconv.Unquote(value); err == nil && (s == "true" || s == "false") {
			return fmt.Sprintf("%s: write it without quotes: %s = %s", head, name, s)
		}
		return fmt.Sprintf("%s: write %s = true or %s = false, without quotes", head, name, name)
	case kindInt:
		if s, err := strconv.Unquote(value); err == nil {
			if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
				return fmt.Sprintf("%s: write it without quotes: %s = %s", head, name, strings.TrimSpace(s))
			}
		}
	case kindList:
		if s, err := strconv.Unquote(value); err == nil {
			var items []string
			for _, f := range strings.Split(s, ",") {
				if f = strings.TrimSpace(f); f != "" {
					items = append(items, strconv.Quote(f))
				}
			}
			if len(items) > 0 {
				return fmt.Sprintf("%s: write it as a list: %s = [%s]", head, name, strings.Join(items, ", "))
			}
		}
		if m[2] == "string" {
			return fmt.Sprintf("%s: quote each name: %s = %s", head, name, spec.example)
		}
	}
	return fmt.Sprintf("%s: for example %s = %s", head, name, spec.example)
}

// specOf finds the spec of a decoder key path and the name to show: the
// key itself, or the field of a [prices.<model>] table.
func specOf(key string) (keySpec, string, bool) {
	if spec, ok := keySpecs[key]; ok {
		return spec, key, true
	}
	for _, table := range []string{"prices.", "models."} {
		if rest, ok := strings.CutPrefix(key, table); ok {
			for _, f := range []string{"input", "cached_input", "output", "cache_write"} {
				if strings.HasSuffix(rest, "."+f) && (table == "prices." || strings.HasSuffix(rest, ".price."+f)) {
					return priceFieldSpec, key, true
				}
			}
		}
	}
	for table, specs := range map[string]map[string]keySpec{"model_providers.": providerFieldSpecs, "models.": modelFieldSpecs, "mcp_servers.": mcpFieldSpecs} {
		if rest, ok := strings.CutPrefix(key, table); ok {
			if i := strings.LastIndexByte(rest, '.'); i >= 0 {
				if spec, ok := specs[rest[i+1:]]; ok {
					return spec, key, true
				}
			}
		}
	}
	return keySpec{}, "", false
}

// tomlTypeName names a decoded TOML value's Go type as a person would.
func tomlTypeName(t string) string {
	switch t {
	case "int64":
		return "a number"
	case "float64":
		return "a decimal number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	}
	if strings.HasPrefix(t, "[]") {
		return "a list"
	}
	if strings.HasPrefix(t, "map[") {
		return "a table"
	}
	return "a " + t
}

// valueText is the value written on a "key = value" line, without a
// trailing comment outside quotes; numbers and booleans as written.
func valueText(line string) string {
	_, v, ok := strings.Cut(line, "=")
	if !ok {
		return ""
	}
	v = strings.TrimSpace(v)
	inQuote := byte(0)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inQuote != 0 && c == '\\' && inQuote == '"':
			i++
		case inQuote != 0 && c == inQuote:
			inQuote = 0
		case inQuote == 0 && (c == '"' || c == '\''):
			inQuote = c
		case inQuote == 0 && c == '#':
			return strings.TrimSpace(v[:i])
		}
	}
	return v
}
