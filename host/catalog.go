package host

import (
	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider"
)

// Catalog is the model catalog: the models a session may select and the
// prices that turn their usage into cost.
type Catalog struct {
	// Models are the selectable models, in the order listed.
	Models []provider.Model
	// Prices price the models' usage; a model without a price has
	// unknown cost (listed without prices).
	Prices agent.PriceTable
	// Default is the model a new session uses.
	Default string
}

// DefaultCatalog is the catalog of a Runtime without one: the provider's
// model table with the built-in prices.
func DefaultCatalog() Catalog {
	var ms []provider.Model
	for _, name := range provider.ModelNames() {
		m, _ := provider.LookupModel(name)
		ms = append(ms, m)
	}
	return Catalog{Models: ms, Prices: agent.DefaultPrices()}
}
