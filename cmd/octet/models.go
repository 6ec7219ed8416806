package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/stack"
	"github.com/octet-agent/octet/internal/config"
)

const modelsUsage = "octet models [--json]"

// runModels is `octet models`: the model catalog of the configuration in
// this directory, with the endpoint's own list merged in when it answers
// (GET /models), as octet/models gives it to editors.
func runModels(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("models", modelsUsage, e.stdout)
	asJSON := fs.Bool("json", false, "print the catalog as JSON (the result of octet/models)")
	if _, err := parseSub(fs, modelsUsage, args, 0); err != nil {
		return err
	}
	log := newLogger(e.stderr, e.lookup)
	cfg, err := stack.LoadConfig(e.lookup, e.cwd, config.Flags{}, log)
	if err != nil {
		return err
	}
	cat := host.CatalogFor(cfg)
	key, err := stack.LoadAPIKey(e.lookup, cfg)
	if err == nil {
		ids, lerr := stack.EndpointModels(ctx, cfg, key, log)
		if lerr == nil {
			cat = cat.WithListing(ids)
		} else {
			err = lerr
		}
	}
	if err != nil {
		cat.ListError = "the endpoint did not list its models: " + err.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Models    []host.ModelView `json:"models"`
			Default   string           `json:"default"`
			ListError string           `json:"listError,omitempty"`
		}{cat.Views(), cat.Default, cat.ListError})
	}
	if cat.ListError != "" {
		fmt.Fprintf(e.stderr, "%s; showing octet's own table (%s)\n", visible(cat.ListError), visible(cfg.BaseURL.Value))
	}
	printModels(e.stdout, cat)
	return nil
}

// printModels writes the catalog as a table: what octet does not know of
// a model says "unknown".
func printModels(w io.Writer, cat host.Catalog) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "MODEL\tCONTEXT\tOUTPUT\tREASONING\tIMAGES\tPRICE $/1M (input, cached, output)"
	if cat.Listed {
		head += "\tLISTED"
	}
	fmt.Fprintln(tw, head)
	for _, v := range cat.Views() {
		name := visible(v.ID)
		if v.ID == cat.Default {
			name += " (default)"
		}
		price := "unknown"
		if p := v.Prices; p != nil {
			price = p.Input + ", " + p.CachedInput + ", " + p.Output
		}
		row := []string{name, tokens(v.ContextWindow), tokens(v.MaxOutputTokens), yesNo(v.Reasoning), yesNo(v.Images), price}
		if v.Listed != nil {
			row = append(row, yesNo(v.Listed))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// tokens is a token count in thousands ("400K"), or "unknown".
func tokens(n *int) string {
	switch {
	case n == nil:
		return "unknown"
	case *n%1000 == 0:
		return strconv.Itoa(*n/1000) + "K"
	}
	return strconv.Itoa(*n)
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return "yes"
	}
	return "no"
}
