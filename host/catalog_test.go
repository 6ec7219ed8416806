package host

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
