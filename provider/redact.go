package provider

import (
	"fmt"
	"log/slog"
)

// The transports and their configurations hold the API key. Printing one
// with fmt (%v, %+v, %#v) or logging it with slog shows the destination and
// the bounds but never the key: these methods keep a stray debug print from
// becoming a credential leak.

var (
	_ fmt.Stringer   = HTTPConfig{}
	_ fmt.GoStringer = HTTPConfig{}
	_ slog.LogValuer = HTTPConfig{}
	_ fmt.Stringer   = WSConfig{}
	_ fmt.GoStringer = WSConfig{}
	_ slog.LogValuer = WSConfig{}
	_ fmt.Stringer   = (*HTTP)(nil)
	_ fmt.GoStringer = (*HTTP)(nil)
	_ slog.LogValuer = (*HTTP)(nil)
	_ fmt.Stringer   = (*WebSocket)(nil)
	_ fmt.GoStringer = (*WebSocket)(nil)
	_ slog.LogValuer = (*WebSocket)(nil)
)

// keyState describes a configured credential without revealing it.
func keyState(key string, fn bool) string {
	switch {
	case fn:
		return "[credential func]"
	case key != "":
		return "[REDACTED]"
	}
	return "[none]"
}

// String describes the configuration with the API key redacted.
func (c HTTPConfig) String() string {
	return fmt.Sprintf("provider.HTTPConfig{BaseURL:%s APIKey:%s MaxFrameBytes:%d MaxBodyBytes:%d IdleTimeout:%v OpenTimeout:%v Features:%v}",
		RedactURL(c.BaseURL), keyState(c.APIKey, c.Credential != nil), c.MaxFrameBytes, c.MaxBodyBytes, c.IdleTimeout, c.OpenTimeout, c.Features)
}

// GoString is String, so %#v redacts too.
func (c HTTPConfig) GoString() string { return c.String() }

// LogValue logs the configuration with the API key redacted.
func (c HTTPConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", RedactURL(c.BaseURL)), slog.String("api_key", keyState(c.APIKey, c.Credential != nil)),
		slog.Duration("idle_timeout", c.IdleTimeout), slog.String("features", c.Features.String()))
}

// String describes the configuration with the API key redacted.
func (c WSConfig) String() string {
	return fmt.Sprintf("provider.WSConfig{BaseURL:%s APIKey:%s MaxFrameBytes:%d IdleTimeout:%v ConnectTimeout:%v PingInterval:%v Features:%v}",
		RedactURL(c.BaseURL), keyState(c.APIKey, c.Credential != nil), c.MaxFrameBytes, c.IdleTimeout, c.ConnectTimeout, c.PingInterval, c.Features)
}

// GoString is String, so %#v redacts too.
func (c WSConfig) GoString() string { return c.String() }

// LogValue logs the configuration with the API key redacted.
func (c WSConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", RedactURL(c.BaseURL)), slog.String("api_key", keyState(c.APIKey, c.Credential != nil)),
		slog.Duration("idle_timeout", c.IdleTimeout), slog.String("features", c.Features.String()))
}

// String describes the transport (its configuration, key redacted).
func (h *HTTP) String() string { return "provider.HTTP " + h.cfg.String() }

// GoString is String, so %#v redacts too.
func (h *HTTP) GoString() string { return h.String() }

// LogValue logs the transport's configuration with the key redacted.
func (h *HTTP) LogValue() slog.Value { return h.cfg.LogValue() }

// String describes the transport (its configuration, key redacted).
func (w *WebSocket) String() string { return "provider.WebSocket " + w.cfg.String() }

// GoString is String, so %#v redacts too.
func (w *WebSocket) GoString() string { return w.String() }

// LogValue logs the transport's configuration with the key redacted.
func (w *WebSocket) LogValue() slog.Value { return w.cfg.LogValue() }
