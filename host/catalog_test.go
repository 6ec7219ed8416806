package host

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
)

// TestCatalogWithListing: listed models first (the catalog's in its
// order, then the others in the endpoint's), a dated snapshot known, a
// name octet does not know assumed and unknown, unlisted table models
// last with Listed false.
func TestCatalogWithListing(t *testing.T) {
	cat := DefaultCatalog()
	cat.Models = cat.Models[:3] // gpt-5.3-codex, gpt-5.2-codex, gpt-5.1-codex-max
	got := cat.WithListing([]string{"local", "gpt-5.2-codex", "gpt-5-2025-08-07"})
	var names []string
	for _, m := range got.Models {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"gpt-5.2-codex", "local", "gpt-5-2025-08-07", "gpt-5.3-codex", "gpt-5.1-codex-max"}) {
		t.Fatalf("order %v", names)
	}
	local, snap, unlisted := got.Models[1], got.Models[2], got.Models[3]
	if local.Known || !local.Listed || local.Model != AssumedModel("local") || local.Images || local.Reasoning {
		t.Errorf("unknown listed model: %+v", local)
	}
	if !snap.Known || !snap.Listed || snap.ContextWindow != 400_000 || !snap.Images {
		t.Errorf("snapshot: %+v", snap)
	}
	if !unlisted.Known || unlisted.Listed {
		t.Errorf("unlisted table model: %+v", unlisted)
	}
	v := got.Views()
	if v[1].ContextWindow != nil || v[1].Images != nil || v[1].Listed == nil || !*v[1].Listed || *v[3].Listed {
		t.Errorf("views: %+v %+v", v[1], v[3])
	}
	if len(cat.Models) != 3 || cat.Listed {
		t.Error("WithListing changed its receiver")
	}
	if m, ok := got.Lookup("gpt-5-mini-2025-08-07"); !ok || !m.Known || m.Listed {
		t.Errorf("Lookup of a dated snapshot: %+v %v", m, ok)
	}
}

// TestListModelsNeverHoldsTheCatalog: while the endpoint's list is being
// read, the catalog answers at once (without it); callers reading it
// together wait for one request; its answer is kept and merged in.
func TestListModelsNeverHoldsTheCatalog(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	h := New(&Runtime{ListModels: func(ctx context.Context) ([]string, error) {
		calls.Add(1)
		<-release
		return []string{"local"}, nil
	}}, nil)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { h.ListModels(context.Background()) })
	}
	done := make(chan Catalog)
	go func() { done <- h.Catalog() }()
	select {
	case cat := <-done:
		if cat.Listed {
			t.Error("the catalog was listed before the endpoint answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Catalog waited for the endpoint's list")
	}
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d list requests for three callers", n)
	}
	if m, ok := h.Catalog().Lookup("local"); !ok || !m.Listed {
		t.Errorf("the list was not kept: %+v %v", m, ok)
	}
}

// TestCatalogForDeclaredModels: the catalog is octet's table with the
// [models."NAME"] tables over it: the configured model first with what
// its table declares, a table model's declared window, a model only a
// table names last; a model whose window nobody declared stays assumed
// (its facts unknown to front doors) and keeps the Codex profile's model
// side, as any model octet does not know.
func TestCatalogForDeclaredModels(t *testing.T) {
	cfg := config.Defaults()
	cfg.Model.Value = "local-x"
	window, yes := int64(32768), true
	bigger := int64(272_000)
	cfg.Models = map[string]config.ModelSpec{
		"local-x": {ContextWindow: &window, Images: &yes},
		"gpt-5":   {ContextWindow: &bigger},
		"zeta":    {Reasoning: &yes},
	}
	cat := CatalogFor(&cfg)
	first, last := cat.Models[0], cat.Models[len(cat.Models)-1]
	if first.Name != "local-x" || !first.Known || first.Assumed || first.ContextWindow != 32768 || !first.Images || cat.Default != "local-x" {
		t.Errorf("the configured declared model: %+v", first)
	}
	if m, _ := cat.Lookup("gpt-5"); m.ContextWindow != 272_000 || !m.Known || !m.Images {
		t.Errorf("a table model with a declared window: %+v", m)
	}
	if last.Name != "zeta" || last.Known || !last.Assumed || !last.Reasoning || !last.Features.Has(provider.FeatureCodexProfile) {
		t.Errorf("a declared model without a window: %+v", last)
	}
	v := cat.Views()
	if v[0].MaxOutputTokens != nil || v[0].ContextWindow == nil || v[len(v)-1].ContextWindow != nil {
		t.Errorf("views: %+v, %+v", v[0], v[len(v)-1])
	}
	if Model(&cfg, "nobody-knows") != AssumedModel("nobody-knows") {
		t.Errorf("an unknown model: %+v", Model(&cfg, "nobody-knows"))
	}
}

// TestDeclaredNativeSteering: native_steering = true in a model's table
// grants the model side of native steering (no model of octet's table
// has it); false withdraws it; unset leaves the table's.
func TestDeclaredNativeSteering(t *testing.T) {
	cfg := config.Defaults()
	yes, no := true, false
	cfg.Models = map[string]config.ModelSpec{"astra": {NativeSteering: &yes}, "gpt-5.1-codex": {NativeSteering: &no}}
	if !Model(&cfg, "astra").Features.Has(provider.FeatureNativeSteering) {
		t.Error("native_steering = true did not grant the model side")
	}
	if Model(&cfg, "gpt-5.1-codex").Features.Has(provider.FeatureNativeSteering) || !Model(&cfg, "gpt-5.1-codex").Features.Has(provider.FeatureWebSocket) {
		t.Error("native_steering = false changed other features or kept steering")
	}
	if Model(&cfg, "gpt-5.3-codex").Features.Has(provider.FeatureNativeSteering) {
		t.Error("a table model has native steering without a declaration")
	}
	cfg.Models["astra"] = config.ModelSpec{NativeCompaction: &yes}
	if m := Model(&cfg, "astra"); !m.Features.Has(provider.FeatureNativeCompaction) || m.Features.Has(provider.FeatureNativeSteering) {
		t.Errorf("native_compaction = true: %s", m.Features)
	}
	if Model(&cfg, "gpt-5.3-codex").Features.Has(provider.FeatureNativeCompaction) {
		t.Error("a table model has native compaction without a declaration")
	}
}
