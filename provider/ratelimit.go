package provider

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitWindow is one x-ratelimit-* header family (requests or tokens).
type RateLimitWindow struct {
	// Present is true when any header of the family was sent.
	Present   bool
	Limit     int64
	Remaining int64
	// Reset is how long until the window resets ("1s", "6m0s", "20ms").
	Reset time.Duration
}

// RateLimits are the rate-limit headers of a response.
type RateLimits struct {
	Requests RateLimitWindow
	Tokens   RateLimitWindow
}

// ParseRateLimits reads the x-ratelimit-{limit,remaining,reset}-{requests,
// tokens} headers. Malformed values are ignored.
func ParseRateLimits(h http.Header) RateLimits {
	return RateLimits{
		Requests: parseWindow(h, "requests"),
		Tokens:   parseWindow(h, "tokens"),
	}
}

func parseWindow(h http.Header, kind string) RateLimitWindow {
	var w RateLimitWindow
	if v := h.Get("X-Ratelimit-Limit-" + kind); v != "" {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			w.Limit, w.Present = n, true
		}
	}
	if v := h.Get("X-Ratelimit-Remaining-" + kind); v != "" {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			w.Remaining, w.Present = n, true
		}
	}
	if v := h.Get("X-Ratelimit-Reset-" + kind); v != "" {
		if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil && d >= 0 {
			w.Reset, w.Present = d, true
		} else if d, ok := parseDecimal(strings.TrimSpace(v), time.Second); ok {
			w.Reset, w.Present = d, true
		}
	}
	return w
}

// maxRetryAfter bounds absurd Retry-After values (one day).
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value: delay-seconds
// (fractional seconds tolerated) or an HTTP-date relative to now. The
// "retry-after-ms" header is consulted by [RetryAfterFromHeader].
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, ok := parseDecimal(v, time.Second); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return min(d, maxRetryAfter), true
}

// RetryAfterFromHeader reads retry-after-ms, then Retry-After.
func RetryAfterFromHeader(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := parseDecimal(strings.TrimSpace(h.Get("Retry-After-Ms")), time.Millisecond); ok {
		return d, true
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

// parseDecimal reads a plain non-negative decimal ("5", "1.5"; no sign,
// exponent, hex, NaN or Inf) as a count of unit, clamped to a day.
func parseDecimal(v string, unit time.Duration) (time.Duration, bool) {
	if v == "" || decimalPrefix(v) != len(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return scaleDuration(f, unit)
}
