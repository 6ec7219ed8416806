package host

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
)

// Catalog is the model catalog: the models a session may select, what
// octet knows of each, and the prices that turn their usage into cost.
// It is built in one place: [CatalogFor] (octet's model table and the
// configuration), then [Catalog.WithListing] (the endpoint's own list).
type Catalog struct {
	// Models are the selectable models, in the order listed.
	Models []CatalogModel
	// Prices price the models' usage; a model without a price has
	// unknown cost (listed without prices).
	Prices agent.PriceTable
	// Default is the model a new session uses.
	Default string
	// Listed reports that the endpoint's model list is merged in.
	Listed bool
	// ListError says why the endpoint's list is not merged in ("" when
	// it is, or when it was not asked for).
	ListError string
}

// CatalogModel is one model of a catalog.
type CatalogModel struct {
	provider.Model
	// Known reports that octet's model table (or its configuration)
	// describes the model. For a model it does not know, the Model's
	// limits and capabilities are what octet assumes ([AssumedModel]),
	// and front doors show them as unknown.
	Known bool
	// Listed reports that the endpoint lists the model.
	Listed bool
}

// AssumedModel is how octet runs a model it knows nothing about
// (provider.Model.Assumed): an AssumedContextWindow (128K tokens) context
// window, the output bound left to the server, without the reasoning
// controls, image input or any Responses feature it cannot know the
// model has. It does carry the model side of the Codex profile:
// qualification for provider recovery follows the host-selected profile
// and route, never the model's name, so on a qualified route a model
// octet does not know keeps the route's recovery rules.
func AssumedModel(name string) provider.Model {
	return provider.Model{Name: name, ContextWindow: provider.AssumedContextWindow, Assumed: true,
		Features: provider.FeatureCodexProfile | provider.FeatureParallelToolCalls | provider.FeatureWebSocket}
}

// Model is the model cfg knows by name: octet's table entry with what a
// [models."NAME"] table declares over it, a model only such a table
// describes, or, for any other name, AssumedModel. A declared model
// without a context_window is still Assumed.
func Model(cfg *config.Config, name string) provider.Model {
	m, known := provider.LookupModel(name)
	if !known {
		m = AssumedModel(name)
	}
	spec, declared := cfg.Models[name]
	if !declared {
		return m
	}
	if spec.ContextWindow != nil {
		m.ContextWindow, m.Assumed = int(*spec.ContextWindow), false
	}
	if spec.MaxOutputTokens != nil {
		m.MaxOutputTokens = int(*spec.MaxOutputTokens)
	}
	if spec.Reasoning != nil {
		// The model side of the reasoning controls and of replaying its
		// encrypted reasoning (the route grants the rest).
		m.Reasoning = *spec.Reasoning
		const reasoning = provider.FeatureReasoning | provider.FeatureEncryptedReasoning
		if m.Reasoning {
			m.Features |= reasoning
		} else {
			m.Features &^= reasoning
		}
	}
	if spec.Images != nil {
		m.Images = *spec.Images
	}
	setFeature(&m.Features, provider.FeatureParallelToolCalls, spec.ParallelToolCalls)
	setFeature(&m.Features, provider.FeatureNativeSteering, spec.NativeSteering)
	setFeature(&m.Features, provider.FeatureNativeCompaction, spec.NativeCompaction)
	return m
}

// setFeature grants or withdraws the model side of f as on says (nil:
// as octet's table has it).
func setFeature(fs *provider.ResponsesFeatures, f provider.ResponsesFeatures, on *bool) {
	switch {
	case on == nil:
	case *on:
		*fs |= f
	default:
		*fs &^= f
	}
}

// ModelWarning is what to tell the user about the model cfg selects, or
// "": that its context window is assumed, and where to declare it.
func ModelWarning(cfg *config.Config, m provider.Model) string {
	if !m.Assumed {
		return ""
	}
	return fmt.Sprintf("model %q: context window unknown; assuming %d tokens (declare context_window and max_output_tokens in [models.%q] of %s)",
		m.Name, m.ContextWindow, m.Name, filepath.Join(cfg.Home, "config.toml"))
}

// DefaultCatalog is the catalog of a Runtime without one: the provider's
// model table with the built-in prices.
func DefaultCatalog() Catalog {
	var ms []CatalogModel
	for _, name := range provider.ModelNames() {
		m, _ := provider.LookupModel(name)
		ms = append(ms, CatalogModel{Model: m, Known: true})
	}
	return Catalog{Models: ms, Prices: agent.DefaultPrices()}
}

// CatalogFor is the catalog of a configuration: octet's model table with
// what cfg's [models."NAME"] tables declare over it and cfg's prices; its
// model the default and listed first when the table does not know it (as
// a dated snapshot of one it knows, or assumed); then the models only
// cfg declares, by name.
func CatalogFor(cfg *config.Config) Catalog {
	cat := DefaultCatalog()
	cat.Default = cfg.Model.Value
	cat.Prices = Prices(cfg)
	for i := range cat.Models {
		cat.Models[i] = catalogModel(cfg, cat.Models[i].Name)
	}
	has := func(name string) bool {
		return slices.ContainsFunc(cat.Models, func(m CatalogModel) bool { return m.Name == name })
	}
	if cat.Default != "" && !has(cat.Default) {
		cat.Models = append([]CatalogModel{catalogModel(cfg, cat.Default)}, cat.Models...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Models)) {
		if !has(name) {
			cat.Models = append(cat.Models, catalogModel(cfg, name))
		}
	}
	return cat
}

// catalogModel is name as cfg knows it (Model): known unless its context
// window is assumed.
func catalogModel(cfg *config.Config, name string) CatalogModel {
	m := Model(cfg, name)
	return CatalogModel{Model: m, Known: !m.Assumed}
}

// lookupOrAssume is name as the provider's table knows it (exactly or as
// a dated snapshot), else assumed.
func lookupOrAssume(name string) CatalogModel {
	if m, ok := provider.LookupModel(name); ok {
		return CatalogModel{Model: m, Known: true}
	}
	return CatalogModel{Model: AssumedModel(name)}
}

// Lookup finds a model of the catalog by name, or a dated snapshot of a
// model octet's table knows ("gpt-5-2025-08-07").
func (c Catalog) Lookup(name string) (CatalogModel, bool) {
	if i := slices.IndexFunc(c.Models, func(m CatalogModel) bool { return m.Name == name }); i >= 0 {
		return c.Models[i], true
	}
	if m, ok := provider.LookupModel(name); ok {
		return CatalogModel{Model: m, Known: true}, true
	}
	return CatalogModel{}, false
}

// WithListing merges the endpoint's list of model ids into c: listed
// models come first (those c holds in c's order, then the others in the
// endpoint's order, known when octet's table knows them as dated
// snapshots and assumed otherwise), then c's models the endpoint does not
// list. c is not changed.
func (c Catalog) WithListing(ids []string) Catalog {
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	out := c
	out.Listed, out.ListError = true, ""
	out.Models = make([]CatalogModel, 0, len(c.Models)+len(ids))
	var unlisted []CatalogModel
	have := make(map[string]bool, len(c.Models))
	for _, m := range c.Models {
		have[m.Name] = true
		m.Listed = listed[m.Name]
		if m.Listed {
			out.Models = append(out.Models, m)
		} else {
			unlisted = append(unlisted, m)
		}
	}
	for _, id := range ids {
		if have[id] {
			continue
		}
		have[id] = true
		m := lookupOrAssume(id)
		m.Listed = true
		out.Models = append(out.Models, m)
	}
	out.Models = append(out.Models, unlisted...)
	return out
}

// ModelView is one model as the front doors show it: what octet does
// not know is null.
type ModelView struct {
	ID              string     `json:"id"`
	ContextWindow   *int       `json:"contextWindow"`
	MaxOutputTokens *int       `json:"maxOutputTokens"`
	Reasoning       *bool      `json:"reasoning"`
	Images          *bool      `json:"images"`
	Prices          *PriceView `json:"prices,omitempty"`
	// Listed is present when the endpoint's list is merged in: whether
	// the endpoint lists the model.
	Listed *bool `json:"listed,omitempty"`
}

// PriceView is a model's price in exact decimal US dollars per million
// tokens, as price lists and config.toml state them.
type PriceView struct {
	Input       string `json:"input"`
	CachedInput string `json:"cachedInput"`
	Output      string `json:"output"`
}

// Views are the catalog's models as the front doors show them.
func (c Catalog) Views() []ModelView {
	out := make([]ModelView, 0, len(c.Models))
	for _, m := range c.Models {
		v := ModelView{ID: m.Name}
		if m.Known {
			v.ContextWindow = &m.ContextWindow
			if m.MaxOutputTokens > 0 { // 0: a declared model's bound left to the server
				v.MaxOutputTokens = &m.MaxOutputTokens
			}
			v.Reasoning, v.Images = &m.Reasoning, &m.Images
		}
		if pr, ok := c.Prices[m.Name]; ok {
			v.Prices = &PriceView{Input: USDPerMillion(pr.Input), CachedInput: USDPerMillion(pr.CachedInput), Output: USDPerMillion(pr.Output)}
		}
		if c.Listed {
			v.Listed = &m.Listed
		}
		out = append(out, v)
	}
	return out
}

// USDPerMillion formats a per-token price in picodollars as US dollars
// per million tokens: one picodollar per token is one micro-dollar per
// million tokens, so the conversion is exact.
func USDPerMillion(p agent.Picodollars) string {
	whole, frac := int64(p)/1_000_000, int64(p)%1_000_000
	s := strconv.FormatInt(whole, 10)
	if frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return s
}

// How long the endpoint's model list is kept: a list for listFresh, a
// failure for listRetry before the endpoint is asked again.
const (
	listFresh = 5 * time.Minute
	listRetry = time.Minute
)

// modelList is the endpoint's model list as last read, shared by a
// host's sessions. fetch serializes the reads of the list; mu guards
// the fields only, so the catalog is never held up by a read.
type modelList struct {
	fetch sync.Mutex
	mu    sync.Mutex
	ids   []string
	err   error
	at    time.Time
}

// merged is cat with the last list read merged in (or its error).
func (l *modelList) merged(cat Catalog) Catalog {
	l.mu.Lock()
	ids, err, at := l.ids, l.err, l.at
	l.mu.Unlock()
	switch {
	case at.IsZero():
		return cat
	case err != nil:
		cat.ListError = err.Error()
		return cat
	}
	return cat.WithListing(ids)
}

// refresh reads the list again with list when the last one is stale.
// Concurrent callers wait for one read.
func (l *modelList) refresh(ctx context.Context, list func(context.Context) ([]string, error)) {
	l.fetch.Lock()
	defer l.fetch.Unlock()
	if l.fresh() {
		return
	}
	ids, err := list(ctx)
	if ctx.Err() != nil && err != nil {
		return // the caller gave up: nothing learned
	}
	if err != nil {
		err = fmt.Errorf("the endpoint did not list its models: %w", err)
	}
	l.mu.Lock()
	l.ids, l.err, l.at = ids, err, time.Now()
	l.mu.Unlock()
}

// fresh reports whether the list last read (or its failure) is recent
// enough to keep.
func (l *modelList) fresh() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	age := time.Since(l.at)
	return !l.at.IsZero() && age < listFresh && (l.err == nil || age < listRetry)
}

// Catalog is the model catalog: the runtime's (DefaultCatalog when it
// has none), merged with the endpoint's model list when one was read
// (see [Host.ListModels]). It asks nothing of the network.
func (h *Host) Catalog() Catalog {
	cat := DefaultCatalog()
	if h.rt.Catalog != nil {
		cat = h.rt.Catalog()
	}
	return h.models.merged(cat)
}

// ListModels reads the endpoint's model list (Runtime.ListModels) when
// the one it has is older than five minutes (a failure: one minute), and
// returns the catalog with it merged in. It waits at most as long as the
// list request's bound (10 s) or ctx.
func (h *Host) ListModels(ctx context.Context) Catalog {
	if h.rt.ListModels != nil {
		h.models.refresh(ctx, h.rt.ListModels)
	}
	return h.Catalog()
}

// resolveWait bounds how long resolving a name octet does not know waits
// for the endpoint's model list.
const resolveWait = 5 * time.Second

// resolveModel maps a model name to the model a session runs: the
// runtime's resolution (octet's table, the configured model), else a
// model the endpoint lists, with what octet knows of it or assumes. For
// a name neither knows it reads the endpoint's list when the one it has
// is stale, waiting at most 5 s.
func (h *Host) resolveModel(name string) (provider.Model, error) {
	m, err := h.rt.Resolve(name)
	if err == nil {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveWait)
	defer cancel()
	cat := h.ListModels(ctx)
	if cm, ok := cat.Lookup(name); ok && cm.Listed {
		return cm.Model, nil
	}
	switch {
	case cat.Listed:
		err = fmt.Errorf("%w; the endpoint does not list it either (octet models shows the models it lists)", err)
	case cat.ListError != "":
		err = fmt.Errorf("%w (%s)", err, cat.ListError)
	}
	return provider.Model{}, err
}
