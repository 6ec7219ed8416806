package session

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// KindApproval is an [Approval] record: a session's standing approvals
// and effect policy, set by its editor.
const KindApproval = "approval"

// Operations of an [Approval] record.
const (
	// ApprovalGrant grants a standing approval (approve for session).
	ApprovalGrant = "grant"
	// ApprovalRevoke revokes the standing approval RuleID names.
	ApprovalRevoke = "revoke"
	// ApprovalPolicy sets the session's effect policy to Policy.
	ApprovalPolicy = "policy"
)

// Approval is one change to a session's approvals: a granted or revoked
// standing approval, or the session's effect policy. The ledger keeps
// them in file order; the current state is their fold
// ([Session.Approvals]). They are not entries: never on the branch, never
// sent to the provider. No grant token or other secret is ever recorded.
type Approval struct {
	// Op is one of ApprovalGrant, ApprovalRevoke, ApprovalPolicy.
	Op string `json:"op"`
	// RuleID identifies the standing approval (grant, revoke).
	RuleID string `json:"rule_id,omitempty"`
	// Tool and Effect are what a grant covers.
	Tool   string `json:"tool,omitempty"`
	Effect string `json:"effect,omitempty"`
	// Path, Command, TimeoutMs, Dir and EnvDigest are a grant's exact
	// scope (see tools.ApprovalScope).
	Path      string `json:"path,omitempty"`
	Command   string `json:"command,omitempty"`
	TimeoutMs int64  `json:"timeout_ms,omitempty"`
	Dir       string `json:"dir,omitempty"`
	EnvDigest string `json:"env_digest,omitempty"`
	// Policy is the effect policy a grant was made under, or the one an
	// ApprovalPolicy record sets.
	Policy string `json:"policy,omitempty"`
	// Time is when the change was made.
	Time time.Time `json:"time"`
}

// ApprovalRecord returns an approval record.
func ApprovalRecord(a Approval) Record { return Record{Kind: KindApproval, Approval: &a} }

// validateApproval reports an approval record that cannot be encoded; ok
// is false for other kinds.
func (r Record) validateApproval() (err error, ok bool) {
	if r.Kind != KindApproval {
		return nil, false
	}
	a := r.Approval
	switch {
	case a == nil:
		return fmt.Errorf("approval record without approval"), true
	case a.Op == ApprovalGrant && (a.RuleID == "" || a.Tool == "" || a.Policy == ""):
		return fmt.Errorf("approval grant without rule id, tool or policy"), true
	case a.Op == ApprovalRevoke && a.RuleID == "":
		return fmt.Errorf("approval revoke without rule id"), true
	case a.Op == ApprovalPolicy && a.Policy == "":
		return fmt.Errorf("approval policy record without policy"), true
	case a.Op != ApprovalGrant && a.Op != ApprovalRevoke && a.Op != ApprovalPolicy:
		return fmt.Errorf("approval record with unknown op %q", a.Op), true
	}
	return nil, true
}

// appendJSONBody appends the members of v, a record body encoded with
// encoding/json (an approval, a reasoning record), after its kind and
// batch marks.
func appendJSONBody(b []byte, kind string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return b, fmt.Errorf("encode %s record: %w", kind, err)
	}
	// body is {"op":...}: splice its members after the kind.
	return append(append(b, ','), body[1:len(body)-1]...), nil
}

// decodeApproval decodes one approval record line.
func decodeApproval(line []byte) (Approval, error) {
	var a Approval
	if err := json.Unmarshal(line, &a); err != nil {
		return Approval{}, fmt.Errorf("approval record: %w", err)
	}
	if err, _ := (Record{Kind: KindApproval, Approval: &a}).validateApproval(); err != nil {
		return Approval{}, err
	}
	return a, nil
}

// addApproval folds an approval record line (validated) at loc.
func (ix *index) addApproval(line []byte, loc recLoc) error {
	if line != nil {
		if _, err := decodeApproval(line); err != nil {
			return err
		}
	}
	ix.approvals = append(ix.approvals, loc)
	return nil
}

// Approvals returns every approval record in file order.
func (s *Session) Approvals() []Approval {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Approval, 0, len(s.ix.approvals))
	for _, loc := range s.ix.approvals {
		buf := make([]byte, loc.n)
		_, err := s.f.ReadAt(buf, loc.off)
		var a Approval
		if err == nil {
			a, err = decodeApproval(buf)
		}
		if err != nil {
			// The line was checked when folded; only I/O can fail here.
			slog.Error("session: reading approval record", "path", s.path, "line", loc.line, "err", err)
			break
		}
		out = append(out, a)
	}
	return out
}
