package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// generations hands out tool-catalog generations. Every catalog change in
// any Host takes a fresh number, so two different catalogs never share a
// generation within one process and an intent (and its grant) can never be
// committed against a different catalog than the one it was admitted in.
var generations atomic.Uint64

// toolNamePattern is the provider function-name shape.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Host is the tool registry of one run (the seeds' ExtensionHost): the set
// of tools whose schemas the model sees is exactly the set that can be
// executed. Core tools are registered like any other tool. A Host is safe
// for concurrent use.
type Host struct {
	mu     sync.RWMutex
	tools  []*hostEntry
	byName map[string]*hostEntry
	gen    uint64
}

// hostEntry is one registered tool and its compiled argument schema.
type hostEntry struct {
	tool   Tool
	schema *jsonschema.Schema
}

// NewHost returns an empty host.
func NewHost() *Host {
	return &Host{byName: make(map[string]*hostEntry), gen: generations.Add(1)}
}

// ErrDuplicateTool is wrapped by Register when the name is already taken.
var ErrDuplicateTool = errors.New("duplicate tool name")

// ErrUnknownTool is wrapped by Filter when the allowlist names a tool the
// host does not have.
var ErrUnknownTool = errors.New("unknown tool")

// Register adds t. It refuses a nil tool, a name that is not 1-64 of
// [A-Za-z0-9_-], a duplicate name, and a schema that is not a compilable
// JSON schema for an object. Registration is not approval for any effect.
func (h *Host) Register(t Tool) error {
	if t == nil {
		return errors.New("register tool: nil tool")
	}
	name := t.Name()
	if !toolNamePattern.MatchString(name) {
		return fmt.Errorf("register tool %q: name must be 1-64 characters of A-Z a-z 0-9 _ -", truncateForError(name))
	}
	sch, err := compileSchema(name, t.Schema())
	if err != nil {
		return fmt.Errorf("register tool %s: %w", name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.byName[name]; dup {
		return fmt.Errorf("register tool %s: %w", name, ErrDuplicateTool)
	}
	e := &hostEntry{tool: t, schema: sch}
	h.tools = append(h.tools, e)
	h.byName[name] = e
	h.gen = generations.Add(1)
	return nil
}

// Filter returns a new host holding exactly the tools allow names, in
// registration order: its schemas and its executable set are that set, so a
// disabled tool is neither advertised nor executable. A name the host does
// not have is an error naming it; repeated names are accepted once. An
// empty allow yields a host with no tools. The receiver is not changed.
func (h *Host) Filter(allow []string) (*Host, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	want := make(map[string]bool, len(allow))
	var unknown []error
	for _, n := range allow {
		if _, ok := h.byName[n]; !ok {
			unknown = append(unknown, fmt.Errorf("%w %q in tool allowlist (available: %s)", ErrUnknownTool, truncateForError(n), h.namesLocked()))
			continue
		}
		want[n] = true
	}
	if len(unknown) > 0 {
		return nil, errors.Join(unknown...)
	}
	out := NewHost()
	for _, e := range h.tools {
		if want[e.tool.Name()] {
			out.tools = append(out.tools, e)
			out.byName[e.tool.Name()] = e
		}
	}
	return out, nil
}

func (h *Host) namesLocked() string {
	var b bytes.Buffer
	for i, e := range h.tools {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.tool.Name())
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// Lookup returns the tool registered under name.
func (h *Host) Lookup(name string) (Tool, bool) {
	e, ok := h.entry(name)
	if !ok {
		return nil, false
	}
	return e.tool, true
}

func (h *Host) entry(name string) (*hostEntry, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	e, ok := h.byName[name]
	return e, ok
}

// Tools returns the registered tools in registration order. The slice is
// a copy.
func (h *Host) Tools() []Tool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]Tool, len(h.tools))
	for i, e := range h.tools {
		out[i] = e.tool
	}
	return out
}

// WarmUp calls WarmUp on each registered tool that is a Warmer: a model
// request is out, and the process waits for its answer.
func (h *Host) WarmUp() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, e := range h.tools {
		if w, ok := e.tool.(Warmer); ok {
			w.WarmUp()
		}
	}
}

// Generation returns the tool-catalog generation. It changes on every
// Register and differs between a host and each host Filter returns.
func (h *Host) Generation() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.gen
}

// ValidateArguments checks canonical arguments against the named tool's
// schema. The error wraps ErrInvalidArguments (or ErrUnknownTool) and is
// for logs only, never for the model.
func (h *Host) ValidateArguments(name string, args json.RawMessage) error {
	e, ok := h.entry(name)
	if !ok {
		return fmt.Errorf("validate arguments: %w %q", ErrUnknownTool, truncateForError(name))
	}
	return e.validate(args)
}

func (e *hostEntry) validate(args json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	if err := e.schema.Validate(v); err != nil {
		return fmt.Errorf("%w: schema: %v", ErrInvalidArguments, err)
	}
	return nil
}

// refuseLoader refuses every external $ref: tool schemas are
// self-contained, and compiling one must not read files or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed", truncateForError(url))
}

// compileSchema compiles a tool's argument schema (draft 2020-12 unless it
// says otherwise) and checks that it describes an object.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("empty schema")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema is not a JSON object")
	}
	if t, ok := obj["type"]; !ok || t != "object" {
		return nil, errors.New(`schema must have "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	url := "octet:tool/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return sch, nil
}

// ReplaceGroup atomically replaces every tool whose name starts with
// prefix by ts (an executable extension's current tool set, say), in
// one catalog change: the model sees the new set at its next request, and
// an intent admitted against the old catalog is refused at commit. Each
// tool of ts must have a name with prefix and is checked like Register;
// one that fails is left out and its error returned, the rest are
// registered. An empty ts removes the group.
func (h *Host) ReplaceGroup(prefix string, ts []Tool) error {
	if prefix == "" {
		return errors.New("replace tool group: empty prefix")
	}
	var errs []error
	entries := make([]*hostEntry, 0, len(ts))
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if t == nil {
			continue
		}
		name := t.Name()
		switch {
		case !strings.HasPrefix(name, prefix):
			errs = append(errs, fmt.Errorf("register tool %s: name outside group %s", truncateForError(name), prefix))
			continue
		case !toolNamePattern.MatchString(name):
			errs = append(errs, fmt.Errorf("register tool %q: name must be 1-64 characters of A-Z a-z 0-9 _ -", truncateForError(name)))
			continue
		case seen[name]:
			errs = append(errs, fmt.Errorf("register tool %s: %w", name, ErrDuplicateTool))
			continue
		}
		sch, err := compileSchema(name, t.Schema())
		if err != nil {
			errs = append(errs, fmt.Errorf("register tool %s: %w", name, err))
			continue
		}
		seen[name] = true
		entries = append(entries, &hostEntry{tool: t, schema: sch})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.tools[:0:0]
	for _, e := range h.tools {
		if strings.HasPrefix(e.tool.Name(), prefix) {
			delete(h.byName, e.tool.Name())
			continue
		}
		kept = append(kept, e)
	}
	for _, e := range entries {
		if _, dup := h.byName[e.tool.Name()]; dup {
			errs = append(errs, fmt.Errorf("register tool %s: %w", e.tool.Name(), ErrDuplicateTool))
			continue
		}
		kept = append(kept, e)
		h.byName[e.tool.Name()] = e
	}
	h.tools = kept
	h.gen = generations.Add(1)
	return errors.Join(errs...)
}
