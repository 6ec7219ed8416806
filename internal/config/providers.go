package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/internal/price"
	"github.com/octet-agent/octet/provider"
)

// Wire formats a provider speaks (wire_api): the provider package's.
const (
	WireResponses = string(provider.WireResponses)
	WireChat      = string(provider.WireChat)
	WireAnthropic = string(provider.WireAnthropic)
)

// WireAPIs lists the accepted wire_api values.
var WireAPIs = []string{WireResponses, WireChat, WireAnthropic}

// KeyHeaders lists the accepted key_header values: where the key is
// sent ("authorization" as a bearer token, Azure's "api-key",
// Anthropic's "x-api-key").
var KeyHeaders = provider.KeyHeaders

// DefaultProvider is the provider used when model_provider is not set.
const DefaultProvider = "openai"

// Limits of [model_providers.NAME] and [models."NAME"].
const (
	// MaxProviders bounds how many provider tables one config may hold.
	MaxProviders = 32
	// MaxModels bounds how many model tables one config may hold.
	MaxModels = 256
	// MaxStreamIdleTimeout bounds stream_idle_timeout_secs.
	MaxStreamIdleTimeout = time.Hour
	// MaxOpenTimeout bounds open_timeout_secs.
	MaxOpenTimeout = 10 * time.Minute
	// MaxContextWindow bounds a declared context_window.
	MaxContextWindow = 100_000_000
)

// Provider is one named provider route: where requests go, in which
// wire format, with which key and headers. The built-in presets are
// ProviderPresets; the global config's [model_providers.NAME] tables
// change a preset's fields or define a new provider. A project config
// never defines or changes one.
type Provider struct {
	Name string
	// BaseURL is the API root ("https://api.anthropic.com/v1").
	BaseURL string
	// WireAPI is "responses", "chat" or "anthropic".
	WireAPI string
	// EnvKey is the environment variable holding the key; Credentials
	// the [api_keys] entry of the credentials file holding it. With
	// neither, requests carry no key (a local server).
	EnvKey, Credentials string
	// KeyHeader is where the key is sent; empty means the wire format's
	// own (x-api-key for anthropic, Authorization otherwise).
	KeyHeader string
	// Headers are added to every request; QueryParams to every URL.
	Headers, QueryParams map[string]string
	// RuntimeProfile is the profile the provider's table asserts ("" when
	// it says none; see Config.RuntimeProfile for the effective one).
	RuntimeProfile string
	// StreamIdleTimeout and OpenTimeout bound a stream's silence and a
	// request's opening; zero means the provider package's defaults.
	StreamIdleTimeout, OpenTimeout time.Duration
	// Source is SourceDefault for a preset the user did not change, else
	// SourceConfig.
	Source Source
}

// ProviderPresets are the built-in providers, by name. Azure has no
// base URL: every resource has its own, which the user's
// [model_providers.azure] table names.
func ProviderPresets() map[string]Provider {
	return map[string]Provider{
		"openai": {Name: "openai", BaseURL: DefaultBaseURL, WireAPI: WireResponses, EnvKey: "OPENAI_API_KEY", Credentials: "openai"},
		"azure": {Name: "azure", WireAPI: WireResponses, EnvKey: "AZURE_OPENAI_API_KEY", Credentials: "azure", KeyHeader: "api-key",
			QueryParams: map[string]string{"api-version": "2025-04-01-preview"}},
		"anthropic":  {Name: "anthropic", BaseURL: "https://api.anthropic.com/v1", WireAPI: WireAnthropic, EnvKey: "ANTHROPIC_API_KEY", Credentials: "anthropic"},
		"openrouter": {Name: "openrouter", BaseURL: "https://openrouter.ai/api/v1", WireAPI: WireChat, EnvKey: "OPENROUTER_API_KEY", Credentials: "openrouter"},
		"ollama":     {Name: "ollama", BaseURL: "http://localhost:11434/v1", WireAPI: WireChat},
		"lmstudio":   {Name: "lmstudio", BaseURL: "http://localhost:1234/v1", WireAPI: WireChat},
	}
}

// providerName is a provider's, or a credentials entry's, name.
var providerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// providerFile is one [model_providers.NAME] table as written.
type providerFile struct {
	BaseURL               *string           `toml:"base_url"`
	WireAPI               *string           `toml:"wire_api"`
	EnvKey                *string           `toml:"env_key"`
	Credentials           *string           `toml:"credentials"`
	KeyHeader             *string           `toml:"key_header"`
	Headers               map[string]string `toml:"headers"`
	QueryParams           map[string]string `toml:"query_params"`
	RuntimeProfile        *string           `toml:"runtime_profile"`
	StreamIdleTimeoutSecs *int64            `toml:"stream_idle_timeout_secs"`
	OpenTimeoutSecs       *int64            `toml:"open_timeout_secs"`
}

var providerKeys = []string{"base_url", "wire_api", "env_key", "credentials", "key_header", "headers", "query_params",
	"runtime_profile", "stream_idle_timeout_secs", "open_timeout_secs"}

// providerKeyAdvice answers a key a Codex user may write.
var providerKeyAdvice = map[string]string{
	"http_headers":         "octet calls it headers",
	"env_http_headers":     "a header's value cannot come from the environment; the key comes from env_key or credentials",
	"name":                 "the table's name is the provider's name",
	"requires_openai_auth": "the key comes from env_key or credentials",
}

// ModelSpec is one [models."NAME"] table: what octet cannot know of a
// model its table does not describe. Nil fields were not declared.
type ModelSpec struct {
	ContextWindow     *int64 `toml:"context_window"`
	MaxOutputTokens   *int64 `toml:"max_output_tokens"`
	Reasoning         *bool  `toml:"reasoning"`
	Images            *bool  `toml:"images"`
	ParallelToolCalls *bool  `toml:"parallel_tool_calls"`
	// NativeSteering declares the model side of native steering
	// (steering input sent into the response in progress over the
	// Responses WebSocket); the route grants the rest.
	NativeSteering *bool `toml:"native_steering"`
	// NativeCompaction declares the model side of native compaction (the
	// provider's …/responses/compact endpoint); the route grants the rest.
	NativeCompaction *bool `toml:"native_compaction"`
	// Price replaces the built-in price, like a [prices.NAME] table.
	Price *price.Spec `toml:"price"`
}

var modelKeys = []string{"context_window", "max_output_tokens", "reasoning", "images", "parallel_tool_calls", "native_steering", "native_compaction", "price"}

// validateProviders checks the [model_providers.NAME] tables and the
// model_provider key against the presets and those tables.
func (fc *fileConfig) validateProviders() []error {
	var errs []error
	if len(fc.Providers) > MaxProviders {
		errs = append(errs, fc.errAt("model_providers", "%d providers; at most %d", len(fc.Providers), MaxProviders))
	}
	presets := ProviderPresets()
	for _, name := range slices.Sorted(maps.Keys(fc.Providers)) {
		pf := fc.Providers[name]
		at := func(format string, args ...any) {
			errs = append(errs, &FileError{Path: fc.path, Line: tableLine(fc.data, "model_providers", name),
				Msg: fmt.Sprintf("model_providers.%s: ", name) + fmt.Sprintf(format, args...)})
		}
		if !providerName.MatchString(name) {
			at("a provider's name is letters, digits, '-' and '_'")
			continue
		}
		p, preset := presets[name]
		p.Name = name
		if err := pf.overlay(&p); err != nil {
			at("%v", err)
			continue
		}
		switch {
		case p.BaseURL == "" && name == "azure":
			at(`base_url is your resource's endpoint, e.g. "https://YOUR-RESOURCE.openai.azure.com/openai"`)
		case p.BaseURL == "" && !preset:
			at(`base_url is required for a provider that is not built in (the built-in ones are %s)`, strings.Join(slices.Sorted(maps.Keys(presets)), ", "))
		}
		if p.RuntimeProfile == "codex" && p.WireAPI != WireResponses {
			at(`runtime_profile "codex" asserts an OpenAI Responses route; this provider's wire_api is %q`, p.WireAPI)
		}
	}
	if len(fc.Models) > MaxModels {
		errs = append(errs, fc.errAt("models", "%d models; at most %d", len(fc.Models), MaxModels))
	}
	for _, name := range slices.Sorted(maps.Keys(fc.Models)) {
		if err := fc.Models[name].check(); err != nil {
			errs = append(errs, &FileError{Path: fc.path, Line: tableLine(fc.data, "models", name), Msg: fmt.Sprintf("models.%q: %v", name, err)})
		}
		if _, both := fc.Prices[name]; both && fc.Models[name].Price != nil {
			errs = append(errs, &FileError{Path: fc.path, Line: tableLine(fc.data, "models", name), Msg: fmt.Sprintf("models.%q: price is also set by [prices.%q]; keep one", name, name)})
		}
	}
	return errs
}

// checkModelProvider checks that the global config's model_provider
// names a preset or one of its tables. (A project's names one of the
// user's providers or is ignored: tightenProviders.)
func (fc *fileConfig) checkModelProvider() error {
	if fc.ModelProvider == nil {
		return nil
	}
	presets := ProviderPresets()
	if _, ok := presets[*fc.ModelProvider]; ok || fc.Providers[*fc.ModelProvider] != nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(presets))
	for _, n := range slices.Sorted(maps.Keys(fc.Providers)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return fc.errAt("model_provider", "%q is neither built in nor a [model_providers.%s] table; the providers are %s", *fc.ModelProvider, *fc.ModelProvider, strings.Join(names, ", "))
}

// overlay applies the table's fields to p, checking each.
func (pf *providerFile) overlay(p *Provider) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	p.Source = SourceConfig
	if v := pf.BaseURL; v != nil {
		if err := validateBaseURL(*v); err != nil {
			bad("base_url %v", err)
		}
		p.BaseURL = strings.TrimRight(*v, "/")
	}
	if v := pf.WireAPI; v != nil {
		if !slices.Contains(WireAPIs, *v) {
			bad("wire_api %q is not one of %s", *v, strings.Join(WireAPIs, ", "))
		}
		p.WireAPI = *v
	}
	if p.WireAPI == "" {
		p.WireAPI = WireResponses
	}
	if v := pf.EnvKey; v != nil {
		if *v != "" && !envVarName.MatchString(*v) {
			bad("env_key %q is not an environment variable name", *v)
		}
		p.EnvKey = *v
	}
	if v := pf.Credentials; v != nil {
		if *v != "" && !providerName.MatchString(*v) {
			bad("credentials %q is not an [api_keys] entry name (letters, digits, '-' and '_')", *v)
		}
		p.Credentials = *v
	}
	if v := pf.KeyHeader; v != nil {
		if !slices.Contains(KeyHeaders, *v) {
			bad("key_header %q is not one of %s", *v, strings.Join(KeyHeaders, ", "))
		}
		p.KeyHeader = *v
	}
	if pf.Headers != nil {
		for _, k := range slices.Sorted(maps.Keys(pf.Headers)) {
			v := pf.Headers[k]
			switch {
			case !headerName.MatchString(k):
				bad("headers: %q is not a header name", k)
			case provider.IsCredentialHeader(k): // the key has its own source, kept out of logs and sessions
				bad("headers: %s carries a credential; the key comes from env_key or credentials (key_header says where it goes)", k)
			case strings.ContainsAny(v, "\r\n\x00"):
				bad("headers: the value of %s has a line break", k)
			}
		}
		p.Headers = maps.Clone(pf.Headers)
	}
	if pf.QueryParams != nil {
		for k := range pf.QueryParams {
			if k == "" {
				bad("query_params: a parameter has an empty name")
			}
		}
		p.QueryParams = maps.Clone(pf.QueryParams)
	}
	if v := pf.RuntimeProfile; v != nil {
		if !slices.Contains(RuntimeProfiles, *v) {
			bad("runtime_profile %q is not one of %s", *v, strings.Join(RuntimeProfiles, ", "))
		}
		p.RuntimeProfile = *v
	}
	if v := pf.StreamIdleTimeoutSecs; v != nil {
		if *v < 1 || time.Duration(*v)*time.Second > MaxStreamIdleTimeout {
			bad("stream_idle_timeout_secs %d is out of range 1..%d", *v, int(MaxStreamIdleTimeout.Seconds()))
		}
		p.StreamIdleTimeout = time.Duration(*v) * time.Second
	}
	if v := pf.OpenTimeoutSecs; v != nil {
		if *v < 1 || time.Duration(*v)*time.Second > MaxOpenTimeout {
			bad("open_timeout_secs %d is out of range 1..%d", *v, int(MaxOpenTimeout.Seconds()))
		}
		p.OpenTimeout = time.Duration(*v) * time.Second
	}
	return errors.Join(errs...)
}

// check validates a model table.
func (m ModelSpec) check() error {
	var errs []error
	if m.ContextWindow != nil && (*m.ContextWindow < 1024 || *m.ContextWindow > MaxContextWindow) {
		errs = append(errs, fmt.Errorf("context_window %d is out of range 1024..%d", *m.ContextWindow, MaxContextWindow))
	}
	if m.MaxOutputTokens != nil {
		limit := int64(MaxContextWindow)
		if m.ContextWindow != nil {
			limit = *m.ContextWindow
		}
		if *m.MaxOutputTokens < 1 || *m.MaxOutputTokens > limit {
			errs = append(errs, fmt.Errorf("max_output_tokens %d is out of range 1..%d", *m.MaxOutputTokens, limit))
		}
	}
	if m.Price != nil {
		in, _, _, err := m.Price.Parse()
		if err == nil {
			_, err = m.Price.CacheWritePrice(in)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("price %v (input, cached_input and output as decimal strings of US dollars per million tokens, e.g. input = \"1.25\")", err))
		}
	}
	return errors.Join(errs...)
}

// applyProviders overlays the global config's provider and model
// tables: a table changes its preset's fields or defines a provider.
func (fc *fileConfig) applyProviders(c *Config, src Source) {
	for name, pf := range fc.Providers {
		p, ok := c.Providers[name]
		if !ok {
			p = Provider{Name: name}
		}
		_ = pf.overlay(&p) // checked by validate
		if name == DefaultProvider && pf.BaseURL != nil {
			set(&c.BaseURL, p.BaseURL, src)
		}
		c.Providers[name] = p
		c.userProviders = append(c.userProviders, name)
	}
	setIf(&c.ModelProvider, fc.ModelProvider, src)
	if len(fc.Models) > 0 && c.Models == nil {
		c.Models = map[string]ModelSpec{}
	}
	var prices map[string]price.Spec
	for name, m := range fc.Models {
		c.Models[name] = m
		if m.Price != nil {
			if prices == nil {
				prices = maps.Clone(c.Prices.Value)
				if prices == nil {
					prices = map[string]price.Spec{}
				}
			}
			prices[name] = *m.Price
		}
	}
	if prices != nil {
		set(&c.Prices, prices, src)
	}
	if fc.MaxRetryWaitSecs != nil {
		set(&c.MaxRetryWait, time.Duration(*fc.MaxRetryWaitSecs)*time.Second, src)
	}
}

// tightenProviders applies a project config's provider keys: it may
// choose among the user's own providers (one the global config has a
// table for, or the one already selected), never define or change one,
// nor declare models.
func (fc *fileConfig) tightenProviders(c *Config, warn func(key, format string, args ...any)) {
	if len(fc.Providers) > 0 {
		warn("model_providers", "a project may not define or change a provider (it would choose where your key goes)")
	}
	if len(fc.Models) > 0 {
		warn("models", "only the global config may declare models")
	}
	if fc.MaxRetryWaitSecs != nil {
		tightenLimit(&c.MaxRetryWait, time.Duration(*fc.MaxRetryWaitSecs)*time.Second, "max_retry_wait_secs", warn)
	}
	if fc.ModelProvider == nil || *fc.ModelProvider == c.ModelProvider.Value {
		return
	}
	if !slices.Contains(c.userProviders, *fc.ModelProvider) {
		warn("model_provider", "%q is not one of your providers (a [model_providers.NAME] table in %s, or %s selected there); keeping %s",
			*fc.ModelProvider, c.Home+"/config.toml", c.ModelProvider.Value, c.ModelProvider.Value)
		return
	}
	set(&c.ModelProvider, *fc.ModelProvider, SourceProjectConfig)
}

// resolveProvider fixes the effective route once every layer applied:
// BaseURL and RuntimeProfile say the selected provider's values (the
// top-level base_url, runtime_profile and OPENAI_BASE_URL are the openai
// provider's).
func (c *Config) resolveProvider() error {
	p, ok := c.Providers[c.ModelProvider.Value]
	if !ok {
		return &UsageError{Msg: fmt.Sprintf("model_provider %q is not a provider", c.ModelProvider.Value)}
	}
	if p.Name == DefaultProvider {
		p.BaseURL = c.BaseURL.Value
		if p.RuntimeProfile == "" {
			p.RuntimeProfile = c.RuntimeProfile.Value
		} else {
			set(&c.RuntimeProfile, p.RuntimeProfile, SourceConfig)
		}
		c.Providers[p.Name] = p
		return nil
	}
	if p.BaseURL == "" {
		return &UsageError{Msg: fmt.Sprintf(`model_provider %q has no base_url: set it in [model_providers.%s] of %s (for Azure, "https://YOUR-RESOURCE.openai.azure.com/openai")`, p.Name, p.Name, c.Home+"/config.toml")}
	}
	set(&c.BaseURL, p.BaseURL, p.Source)
	src := p.Source
	if p.RuntimeProfile == "" {
		p.RuntimeProfile, src = "none", SourceDefault
	}
	set(&c.RuntimeProfile, p.RuntimeProfile, src)
	c.Providers[p.Name] = p
	return nil
}

// KeyVariables names every environment variable a provider takes its key
// from (each preset's and each table's env_key), sorted: commands octet
// runs never get them.
func (c *Config) KeyVariables() []string {
	var out []string
	for _, p := range c.Providers {
		if p.EnvKey != "" && !slices.Contains(out, p.EnvKey) {
			out = append(out, p.EnvKey)
		}
	}
	for _, p := range ProviderPresets() {
		if p.EnvKey != "" && !slices.Contains(out, p.EnvKey) {
			out = append(out, p.EnvKey)
		}
	}
	slices.Sort(out)
	return out
}

// Provider returns the selected provider (model_provider), with the
// effective base URL and runtime profile.
func (c *Config) Provider() Provider {
	p := c.Providers[c.ModelProvider.Value]
	p.BaseURL, p.RuntimeProfile = c.BaseURL.Value, c.RuntimeProfile.Value
	if p.Name == "" {
		p.Name, p.WireAPI = c.ModelProvider.Value, WireResponses
	}
	return p
}
