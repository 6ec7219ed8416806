package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// ProtocolVersion is the octet protocol version advertised under
// capabilities.experimental.octet.version: 2 once any v1.1 addition is
// implemented, with the names implemented in features (v1 clients keep
// working).
const ProtocolVersion = 2

// features are the v1.1 additions this server implements.
var features = []string{"octet/session/close",
	"octet/session/rename", "octet/session/fork", "octet/session/delete", "octet/session/transcript",
	"session_state", "octet/models", "usage.contextTokens",
	"octet/session/setPolicy", "octet/approvals/list", "octet/approvals/revoke", "approve_for_session",
	"textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
	"workspace/applyEdit", "octet/prompt.context",
	"octet/session/diff", "octet/session/rewind",
	"octet/extensions/list", "octet/extensions/enable", "extensions_changed",
	"agent_updated", "octet/session/rewind.paths",
	"child_sessions", "plan", "octet/models.listed", "octet/prompt.images",
	"octet.prompt.text", "octet/saveDocuments", "octet/diagnostics",
	"tool_finished.error", "usage.session", "transcript.runs",
}

// Commands offered through workspace/executeCommand for plain LSP clients.
var commands = []string{"octet.prompt", "octet.cancel", "octet.approve", "octet.deny"}

// clientCaps is what the client said it can do.
type clientCaps struct {
	confirmEffect bool // experimental.octet.confirmEffect
	events        bool // experimental.octet.events is literally true
	// sendEvents and sendRecovered: octet/event and octet/recoveredOutput
	// go to every client except one that set the flag to false. The
	// contract delivers run_started (the runId) through octet/event, and a
	// stock client ignores notifications it does not know.
	sendEvents       bool
	sendRecovered    bool
	workDoneProgress bool // window.workDoneProgress
	logLevel         slog.Level
	logToClient      bool // initializationOptions asked for window/logMessage
}

// initializeParams holds the fields of InitializeParams the server uses.
// They are decoded leniently, field by field: "trace": null, a null
// rootUri, and unknown or mistyped values anywhere are ignored rather than
// failing the handshake.
type initializeParams struct {
	ProcessID int // 0 when absent or null
	RootURI   string
	RootPath  string
	Folders   []string // workspaceFolders[].uri
	Trace     *string
	// Capability bits.
	WorkDoneProgress bool
	ConfirmEffect    bool
	Events           bool
	// EventsOff and RecoveredOff: the client set the flag literally false.
	EventsOff    bool
	RecoveredOff bool
	LogLevel     string // initializationOptions.logLevel
	ClientName   string // clientInfo.name
}

// parseInitialize decodes raw leniently; only params that are not a JSON
// object at all are refused.
func parseInitialize(raw []byte) (initializeParams, error) {
	var top map[string]json.RawMessage
	if err := decodeParams(raw, &top); err != nil {
		return initializeParams{}, err
	}
	var p initializeParams
	_ = json.Unmarshal(top["processId"], &p.ProcessID)
	_ = json.Unmarshal(top["rootUri"], &p.RootURI)
	_ = json.Unmarshal(top["rootPath"], &p.RootPath)
	var folders []struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(top["workspaceFolders"], &folders) == nil {
		for _, f := range folders {
			p.Folders = append(p.Folders, f.URI)
		}
	}
	var trace string
	if json.Unmarshal(top["trace"], &trace) == nil && trace != "" {
		p.Trace = &trace
	}
	caps := top["capabilities"]
	p.WorkDoneProgress = lookupBool(caps, "window", "workDoneProgress")
	p.ConfirmEffect = lookupBool(caps, "experimental", "octet", "confirmEffect")
	p.Events = lookupBool(caps, "experimental", "octet", "events")
	p.EventsOff = lookupFalse(caps, "experimental", "octet", "events")
	p.RecoveredOff = lookupFalse(caps, "experimental", "octet", "recoveredOutput")
	_ = json.Unmarshal(lookup(top["initializationOptions"], "logLevel"), &p.LogLevel)
	_ = json.Unmarshal(lookup(top["clientInfo"], "name"), &p.ClientName)
	return p, nil
}

// lookup follows path through nested JSON objects (nil when absent or
// not an object on the way).
func lookup(raw json.RawMessage, path ...string) json.RawMessage {
	for _, k := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		raw = m[k]
	}
	return raw
}

// lookupBool is lookup for a boolean (false unless it is literally true).
func lookupBool(raw json.RawMessage, path ...string) bool {
	var b bool
	_ = json.Unmarshal(lookup(raw, path...), &b)
	return b
}

// lookupFalse reports whether the value at path is literally false.
func lookupFalse(raw json.RawMessage, path ...string) bool {
	b := true
	_ = json.Unmarshal(lookup(raw, path...), &b)
	return !b
}

// initialize records the client's capabilities and workspace and answers
// with the server's.
func (s *Server) initialize(raw jsonrpc2.RawMessage) (any, error) {
	p, err := parseInitialize(raw)
	if err != nil {
		return nil, err
	}
	caps := clientCaps{
		logLevel:         slog.LevelInfo,
		workDoneProgress: p.WorkDoneProgress,
		confirmEffect:    p.ConfirmEffect,
		events:           p.Events,
		sendEvents:       !p.EventsOff,
		sendRecovered:    !p.RecoveredOff,
	}
	if p.LogLevel != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(p.LogLevel)); err == nil {
			caps.logLevel, caps.logToClient = l, true
		} else {
			s.log.Warn("ignoring bad initializationOptions.logLevel", "value", p.LogLevel)
		}
	}
	ws := workspaceFromParams(p)
	enc := s.docs.configure(raw, p)

	s.mu.Lock()
	s.caps = caps
	s.workspace = ws
	s.client = p.ClientName
	if p.Trace != nil {
		s.trace = normalizeTrace(*p.Trace)
	}
	s.state = stateInitialized
	s.mu.Unlock()
	s.log.Info("initialized", "workspace", ws, "confirmEffect", caps.confirmEffect, "workDoneProgress", caps.workDoneProgress)
	if p.ProcessID > 0 {
		go s.watchParent(p.ProcessID)
	}

	experimental, err := json.Marshal(map[string]any{
		"octet": map[string]any{
			"version":         ProtocolVersion,
			"features":        features,
			"events":          true,
			"confirmEffect":   true,
			"recoveredOutput": true,
			"resume":          true,
			"eventBuffer":     s.opts.EventBuffer,
		},
	})
	if err != nil {
		return nil, err
	}
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			ExecuteCommandProvider: protocol.ExecuteCommandOptions{Commands: commands},
			TextDocumentSync:       documentSyncOptions(),
			PositionEncoding:       protocol.PositionEncodingKind(enc),
			Experimental:           jsontext.Value(experimental),
		},
		ServerInfo: protocol.ServerInfo{Name: "octet", Version: protocol.NewOptional(s.opts.Version)},
	}, nil
}

// workspaceFromParams picks the workspace root: the first workspace folder,
// else rootUri, else rootPath. It never falls back to the process cwd.
func workspaceFromParams(p initializeParams) string {
	for _, f := range p.Folders {
		if path := uriToPath(f); path != "" {
			return path
		}
	}
	if path := uriToPath(p.RootURI); path != "" {
		return path
	}
	if filepath.IsAbs(p.RootPath) {
		return filepath.Clean(p.RootPath)
	}
	return ""
}

// uriToPath converts a file:// URI to an absolute path ("" otherwise).
func uriToPath(u string) string {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "file" {
		return ""
	}
	path := parsed.Path
	if path == "" || !filepath.IsAbs(path) {
		return ""
	}
	return filepath.Clean(path)
}

func normalizeTrace(v string) string {
	switch v {
	case "messages", "verbose":
		return v
	default:
		return "off"
	}
}

func (s *Server) setTrace(v string) {
	s.mu.Lock()
	s.trace = normalizeTrace(v)
	s.mu.Unlock()
}

// clientLogLevel reports whether a record at l goes to window/logMessage.
func (s *Server) clientLogLevel(l slog.Level) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateNew {
		return false
	}
	switch {
	case s.caps.logToClient:
		return l >= s.caps.logLevel
	case s.trace == "verbose":
		return true
	case s.trace == "messages":
		return l >= slog.LevelInfo
	}
	return false
}

// cancelRequest handles $/cancelRequest: a numeric or string id naming an
// octet/prompt (or octet.prompt command) cancels that run. Unknown ids are
// ignored, as LSP asks.
func (s *Server) cancelRequest(raw jsonrpc2.RawMessage) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if err := decodeParams(raw, &p); err != nil {
		s.log.Warn("bad $/cancelRequest params", "error", err)
		return
	}
	id, ok := decodeIDValue(p.ID)
	if !ok {
		s.log.Warn("bad $/cancelRequest id", "id", string(p.ID))
		return
	}
	s.mu.Lock()
	r := s.byRequest[id]
	s.mu.Unlock()
	if r != nil {
		r.cancel(fmt.Sprintf("$/cancelRequest %v", id))
	}
}

// cancelProgress handles window/workDoneProgress/cancel for a run's token.
func (s *Server) cancelProgress(raw jsonrpc2.RawMessage) {
	var p struct {
		Token json.RawMessage `json:"token"`
	}
	if err := decodeParams(raw, &p); err != nil {
		s.log.Warn("bad window/workDoneProgress/cancel params", "error", err)
		return
	}
	key := tokenKey(p.Token)
	s.mu.Lock()
	r := s.byToken[key]
	s.mu.Unlock()
	if r != nil {
		r.cancel("window/workDoneProgress/cancel")
	}
}

// tokenKey normalizes a progress token (number or string) for lookup.
func tokenKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	}
	return "n:" + strings.TrimSpace(string(raw))
}

// watchParent ends the server when the editor process that started it is
// gone (LSP: "If the parent process is not alive then the server should
// exit"), as if its input had ended: runs are cancelled and settled.
func (s *Server) watchParent(pid int) {
	if !processAlive(pid) {
		// Not visible from here (another pid namespace, a wrapper):
		// watching it would stop a healthy server.
		s.log.Debug("client processId is not visible; not watching it", "pid", pid)
		return
	}
	t := time.NewTicker(s.opts.parentPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !processAlive(pid) {
			s.log.Warn("the editor process is gone; stopping", "pid", pid)
			s.parentGoneOnce.Do(func() { close(s.parentGone) })
			return
		}
	}
}

// processAlive reports whether pid exists (signal 0 probes without
// delivering anything).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
