package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every message octet sends in these tests (the Go peer's and the SDK
// client's) is validated against the ACP schema the SDK ships:
// schema/v1/schema.json (stable v1), or schema.unstable.json on a
// connection whose client advertised an unstable capability (subagents).
// The schema comes with `npm ci` in testdata/client; without it the
// check is skipped, unless OCTET_TEST_ACP_SCHEMA is set (.ci/run sets it
// once npm ci succeeded), when its absence fails the tests.

// schemaDir is where the SDK's schemas are.
const schemaDir = "testdata/client/node_modules/@agentclientprotocol/sdk/schema/v1"

// responseDefs name the result schema of each method octet answers.
var responseDefs = map[string]string{
	"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
	"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
	"session/resume": "ResumeSessionResponse", "session/list": "ListSessionsResponse",
	"session/close": "CloseSessionResponse", "session/delete": "DeleteSessionResponse",
	"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
	"session/prompt": "PromptResponse",
}

// paramDefs name the params schema of each method octet sends.
var paramDefs = map[string]string{
	"session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest",
	"fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
}

// acpSchemas are the compiled schema definitions, by file and name.
type acpSchemas struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

var (
	schemasOnce sync.Once
	schemas     *acpSchemas
	schemasErr  error
)

// loadSchemas returns the SDK's schemas, or nil when they are not
// installed and the check is not required.
func loadSchemas(t testing.TB) *acpSchemas {
	t.Helper()
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		for _, name := range []string{"schema.json", "schema.unstable.json"} {
			b, err := os.ReadFile(filepath.Join(schemaDir, name))
			if err != nil {
				schemasErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemasErr = fmt.Errorf("%s: %w", name, err)
				return
			}
			if err := c.AddResource("acp:///"+name, doc); err != nil {
				schemasErr = err
				return
			}
		}
		schemas = &acpSchemas{compiler: c, compiled: map[string]*jsonschema.Schema{}}
	})
	if schemasErr != nil {
		if os.Getenv("OCTET_TEST_ACP_SCHEMA") != "" {
			t.Fatalf("the ACP schema is required (OCTET_TEST_ACP_SCHEMA) but cannot be read: %v (run npm ci in acp/testdata/client)", schemasErr)
		}
		return nil
	}
	return schemas
}

// check validates v against definition def of the stable (or unstable)
// schema.
func (s *acpSchemas) check(unstable bool, def string, v any) error {
	file := "schema.json"
	if unstable {
		file = "schema.unstable.json"
	}
	loc := "acp:///" + file + "#/$defs/" + def
	s.mu.Lock()
	sch, ok := s.compiled[loc]
	if !ok {
		var err error
		if sch, err = s.compiler.Compile(loc); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("compile %s: %w", loc, err)
		}
		s.compiled[loc] = sch
	}
	s.mu.Unlock()
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("not a valid %s (%s): %#v", def, file, err)
	}
	return nil
}

// wireCheck validates one connection's messages from octet, in order,
// knowing the client's requests (for the method of each answer) and
// whether it advertised an unstable capability.
type wireCheck struct {
	s        *acpSchemas
	mu       sync.Mutex
	methods  map[string]string // the client's requests, by id
	unstable bool
}

func newWireCheck(s *acpSchemas) *wireCheck {
	return &wireCheck{s: s, methods: map[string]string{}}
}

// fromClient notes a line the client sent.
func (w *wireCheck) fromClient(line []byte) {
	var m message
	if json.Unmarshal(line, &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.methods[string(m.ID)] = m.Method
	if m.Method == "initialize" {
		var p struct {
			ClientCapabilities map[string]json.RawMessage `json:"clientCapabilities"`
		}
		_ = json.Unmarshal(m.Params, &p)
		w.unstable = len(p.ClientCapabilities["subagents"]) > 0
	}
}

// fromOctet validates a line octet sent.
func (w *wireCheck) fromOctet(line []byte) error {
	if w == nil || w.s == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	var m message
	_ = json.Unmarshal(line, &m)
	if m.JSONRPC != "2.0" {
		return fmt.Errorf(`no "jsonrpc":"2.0"`)
	}
	w.mu.Lock()
	unstable, method := w.unstable, w.methods[string(m.ID)]
	w.mu.Unlock()
	obj := v.(map[string]any)
	switch {
	case m.Method != "" && len(m.Method) > 1 && m.Method[0] == '_':
		return nil // an extension (_octet/*): any params
	case m.Method != "":
		def, ok := paramDefs[m.Method]
		if !ok {
			return fmt.Errorf("octet sent %s, which is not a method of the client", m.Method)
		}
		return w.s.check(unstable, def, obj["params"])
	case m.Error != nil:
		return w.s.check(unstable, "Error", obj["error"])
	case method == "":
		return fmt.Errorf("an answer to id %s, which the client never sent", m.ID)
	}
	def, ok := responseDefs[method]
	if !ok {
		return fmt.Errorf("a result for %s, which is not a method of the agent", method)
	}
	return w.s.check(unstable, def, obj["result"])
}

// TestSchemaCheckerRefuses: the checker itself fails what the schema
// refuses (an update kind stable v1 does not have, a tool call without
// its id, an answer to nothing), so a passing test means something.
func TestSchemaCheckerRefuses(t *testing.T) {
	s := loadSchemas(t)
	if s == nil {
		t.Skip("the ACP schema is not installed: run npm ci in acp/testdata/client")
	}
	w := newWireCheck(s)
	w.fromClient([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`))
	good := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":1,"size":2}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","method":"_octet/usage","params":{"anything":true}}`,
	}
	bad := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"subagent_update","sessionId":"c","state":{"state":"running"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","title":"x"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":-1,"size":2}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":9,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}`,
	}
	for _, l := range good {
		if err := w.fromOctet([]byte(l)); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	for _, l := range bad {
		if err := w.fromOctet([]byte(l)); err == nil {
			t.Errorf("%s was accepted", l)
		}
	}
}
