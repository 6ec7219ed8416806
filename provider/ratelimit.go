package provider

import (
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
		} else if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 {
			w.Reset, w.Present = time.Duration(f*float64(time.Second)), true
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
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return 0, false
		}
		d := time.Duration(f * float64(time.Second))
		return min(d, maxRetryAfter), true
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
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			return min(time.Duration(f*float64(time.Millisecond)), maxRetryAfter), true
		}
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}
