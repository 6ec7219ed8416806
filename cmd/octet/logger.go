package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// newLogger logs to w for a person at warn level: "octet: warning: ..."
// sentences (plainHandler). OCTET_LOG=info or debug selects that level
// and slog's structured text lines, with timestamps when debugging.
func newLogger(w io.Writer, lookup func(string) (string, bool)) *slog.Logger {
	v, _ := lookup("OCTET_LOG")
	switch {
	case strings.EqualFold(v, "debug"):
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	case strings.EqualFold(v, "info"):
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: dropTime}))
	}
	return slog.New(&plainHandler{w: w, mu: &sync.Mutex{}})
}

// dropTime removes the time from slog's text lines.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// plainHandler writes warnings and errors as one line each for a person:
// "octet: warning: <message> (<key>: <value>, ...)". Lower levels are
// dropped. Text is passed through visible, since a message may carry
// names from a repository or a server.
type plainHandler struct {
	w      io.Writer
	mu     *sync.Mutex
	attrs  []slog.Attr
	prefix string // group prefix for later attributes ("g.")
}

func (h *plainHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *plainHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("octet: ")
	if r.Level >= slog.LevelError {
		b.WriteString("error: ")
	} else {
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(prefix string, a slog.Attr) {
		if a.Key != "" {
			kv = append(kv, prefix+a.Key+": "+a.Value.Resolve().String())
		}
	}
	for _, a := range h.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool { add(h.prefix, a); return true })
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	line := visible(b.String()) + "\n"
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, line)
	return err
}

func (h *plainHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *plainHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = fmt.Sprintf("%s%s.", h.prefix, name)
	return &c
}
