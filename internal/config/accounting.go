package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/internal/price"
)

// Provider transports (the transport key).
const (
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
)

// Transports lists the accepted transport values.
var Transports = []string{TransportHTTP, TransportWebSocket}

// MaxNetworkWaitLimit is the largest max_network_wait_secs accepted (30
// days); zero means unbounded.
const MaxNetworkWaitLimit = 30 * 24 * time.Hour

// ParseUSD parses an exact decimal amount of US dollars ("5", "12.50",
// "0.000001") into picodollars. At most six fractional digits (one
// micro-dollar, the protocol's costMicros unit) are accepted; more is an
// error, never a rounding. Money is never a float in octet.
func ParseUSD(s string) (price.Picodollars, error) {
	micros, err := price.ParseUSDPerMillion(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal amount of US dollars with at most six decimal places (for example \"5.00\")", s)
	}
	if int64(micros) > math.MaxInt64/1_000_000 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return micros * 1_000_000, nil
}

// priceTable checks a config file's [prices.<model>] tables, naming the
// model and field of the first invalid price.
func (fc *fileConfig) priceTable() (map[string]price.Spec, error) {
	var errs []error
	t := map[string]price.Spec{}
	for _, model := range slices.Sorted(maps.Keys(fc.Prices)) {
		spec := fc.Prices[model]
		in, _, _, err := spec.Parse()
		if err == nil {
			_, err = spec.CacheWritePrice(in)
		}
		if err != nil {
			errs = append(errs, &FileError{Path: fc.path, Line: tableLine(fc.data, "prices", model),
				Msg: fmt.Sprintf("prices.%s: price of model %q %v (every model needs input, cached_input and output as decimal strings of US dollars per million tokens, e.g. input = \"1.25\")", model, model, err)})
			continue
		}
		t[model] = spec
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return t, nil
}

// tableLine finds the line of a [table.name] header (quoted or not), or of
// the table itself, or 0.
func tableLine(data []byte, table, name string) int {
	want := table + "." + name
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(strings.SplitN(raw, "#", 2)[0])
		if !strings.HasPrefix(line, "[") {
			continue
		}
		h := strings.NewReplacer(`"`, "", `'`, "", " ", "", "\t", "").Replace(strings.Trim(line, "[]"))
		if h == want {
			return i + 1
		}
	}
	return keyLine(data, []string{table})
}

// validateAccounting checks the provider and accounting keys.
func (fc *fileConfig) validateAccounting() []error {
	var errs []error
	if fc.Transport != nil && !slices.Contains(Transports, *fc.Transport) {
		errs = append(errs, fc.errAt("transport", "%q is not one of %s", *fc.Transport, strings.Join(Transports, ", ")))
	}
	if fc.Prices != nil {
		t, err := fc.priceTable()
		if err != nil {
			errs = append(errs, err)
		}
		fc.prices = t
	}
	if fc.MaxSessionTokens != nil && *fc.MaxSessionTokens < 0 {
		errs = append(errs, fc.errAt("max_session_tokens", "%d must not be negative (0 means no ceiling)", *fc.MaxSessionTokens))
	}
	if fc.MaxSessionCostUSD != nil {
		c, err := ParseUSD(*fc.MaxSessionCostUSD)
		if err != nil {
			errs = append(errs, fc.errAt("max_session_cost_usd", "%v (0 means no ceiling)", err))
		}
		fc.maxCost = c
	}
	if fc.MaxNetworkWaitSecs != nil && (*fc.MaxNetworkWaitSecs < 0 || *fc.MaxNetworkWaitSecs > int64(MaxNetworkWaitLimit/time.Second)) {
		errs = append(errs, fc.errAt("max_network_wait_secs", "%d is out of range 0..%d (0 means no bound)", *fc.MaxNetworkWaitSecs, int64(MaxNetworkWaitLimit/time.Second)))
	}
	if fc.MaxRetryWaitSecs != nil && (*fc.MaxRetryWaitSecs < 0 || *fc.MaxRetryWaitSecs > int64(MaxNetworkWaitLimit/time.Second)) {
		errs = append(errs, fc.errAt("max_retry_wait_secs", "%d is out of range 0..%d (0 means no bound)", *fc.MaxRetryWaitSecs, int64(MaxNetworkWaitLimit/time.Second)))
	}
	return errs
}

// applyAccounting overlays the global config's provider and accounting
// keys. A [prices.<model>] table replaces that model's built-in price.
func (fc *fileConfig) applyAccounting(c *Config, src Source) {
	setIf(&c.Transport, fc.Transport, src)
	setIf(&c.Prewarm, fc.Prewarm, src)
	if len(fc.prices) > 0 {
		t := maps.Clone(c.Prices.Value)
		if t == nil {
			t = map[string]price.Spec{}
		}
		maps.Copy(t, fc.prices)
		set(&c.Prices, t, src)
	}
	setIf(&c.MaxSessionTokens, fc.MaxSessionTokens, src)
	if fc.MaxSessionCostUSD != nil {
		set(&c.MaxSessionCost, fc.maxCost, src)
	}
	if fc.MaxNetworkWaitSecs != nil {
		set(&c.MaxNetworkWait, time.Duration(*fc.MaxNetworkWaitSecs)*time.Second, src)
	}
}

// tightenAccounting overlays a project config's accounting keys: ceilings
// and the outage bound may only get stricter (a lower non-zero value, or a
// value where none was set); prices and the transport are the user's, not
// a repository's.
func (fc *fileConfig) tightenAccounting(c *Config, warn func(key, format string, args ...any)) {
	if fc.Transport != nil {
		warn("transport", "only the global config may choose the provider transport")
	}
	if fc.Prewarm != nil {
		warn("prewarm", "only the global config may turn on warm-up requests (they are billed)")
	}
	if fc.Prices != nil {
		warn("prices", "only the global config may set prices (a repository could make usage look cheaper under a cost ceiling)")
	}
	if fc.MaxSessionTokens != nil {
		tightenLimit(&c.MaxSessionTokens, *fc.MaxSessionTokens, "max_session_tokens", warn)
	}
	if fc.MaxSessionCostUSD != nil {
		tightenLimit(&c.MaxSessionCost, fc.maxCost, "max_session_cost_usd", warn)
	}
	if fc.MaxNetworkWaitSecs != nil {
		tightenLimit(&c.MaxNetworkWait, time.Duration(*fc.MaxNetworkWaitSecs)*time.Second, "max_network_wait_secs", warn)
	}
}

// tightenLimit applies v to a limit where zero means "no limit": it takes
// effect only when it is stricter than the current value.
func tightenLimit[T int64 | price.Picodollars | time.Duration](s *Setting[T], v T, key string, warn func(string, string, ...any)) {
	switch {
	case v == s.Value:
	case v != 0 && (s.Value == 0 || v < s.Value):
		set(s, v, SourceProjectConfig)
	case v == 0:
		warn(key, "a project may not remove the limit (set from %s)", s.Source)
	default:
		warn(key, "a project may only lower it (now %v from %s)", s.Value, s.Source)
	}
}
