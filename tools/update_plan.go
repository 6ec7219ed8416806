package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

//go:embed update_plan.md
var updatePlanDescription string

// Bounds of a plan: a checklist for a person, not a document.
const (
	MaxPlanSteps       = 30
	MaxPlanStepBytes   = 300
	MaxPlanExplanation = 2000
)

// Plan step statuses.
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
)

var updatePlanSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "explanation": {"type": "string", "description": "Why the plan changed (optional)."},
    "plan": {
      "type": "array",
      "description": "The whole plan, in order.",
      "items": {
        "type": "object",
        "properties": {
          "step": {"type": "string", "description": "The step, in a few words."},
          "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
        },
        "required": ["step", "status"],
        "additionalProperties": false
      }
    }
  },
  "required": ["plan"],
  "additionalProperties": false
}`)

// PlanStep is one step of a plan.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// Plan is the model's plan of its work, as update_plan set it last: the
// whole plan, each call replacing the one before.
type Plan struct {
	Explanation string     `json:"explanation,omitempty"`
	Steps       []PlanStep `json:"plan"`
}

// UpdatePlanTool is update_plan: the model keeps its plan, which the
// front doors show as a checklist. It has no effect beyond its result
// (Pure): the plan is durable in the session as the call's result.
type UpdatePlanTool struct{}

var _ Tool = UpdatePlanTool{}

// Name returns "update_plan".
func (UpdatePlanTool) Name() string { return "update_plan" }

// Description returns the embedded update_plan.md.
func (UpdatePlanTool) Description() string { return updatePlanDescription }

// Schema returns the update_plan argument schema.
func (UpdatePlanTool) Schema() json.RawMessage { return updatePlanSchema }

// Concurrency reports Sequential: two plans in one response apply in
// order, the later one last.
func (UpdatePlanTool) Concurrency() Concurrency { return Sequential }

// ReplaySafety reports ReplaySafe: setting the same plan again is
// harmless.
func (UpdatePlanTool) ReplaySafety() ReplaySafety { return ReplaySafe }

// Classify returns Pure for arguments of the plan's shape. What a plan
// must also be (steps named, one in progress) is checked when it runs,
// so the model's error says which rule it broke (a refused
// classification tells it only that the arguments are not valid).
func (UpdatePlanTool) Classify(args json.RawMessage) (Effect, error) {
	var p Plan
	if err := decodeBuiltinArgs(args, &p); err != nil {
		return Unknown, err
	}
	return Pure, nil
}

// Execute returns the plan in the result's Details and Plan.
func (UpdatePlanTool) Execute(_ context.Context, inv Invocation) (Result, error) {
	p, err := ParsePlan(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	details := map[string]any{"plan": p.Steps}
	if p.Explanation != "" {
		details["explanation"] = p.Explanation
	}
	return Result{Text: fmt.Sprintf("Plan updated: %s.", p.progress()), Details: details, Plan: &p}, nil
}

// progress says how far the plan is ("2 of 5 steps completed").
func (p Plan) progress() string {
	done := 0
	for _, s := range p.Steps {
		if s.Status == StepCompleted {
			done++
		}
	}
	return fmt.Sprintf("%d of %d steps completed", done, len(p.Steps))
}

// ParsePlan decodes and checks update_plan arguments: every step named
// (its whitespace, line breaks included, folded to single spaces) and
// with a known status, at most one in progress, within the bounds.
func ParsePlan(raw json.RawMessage) (Plan, error) {
	var p Plan
	if err := decodeBuiltinArgs(raw, &p); err != nil {
		return Plan{}, err
	}
	if p.Steps == nil {
		return Plan{}, errors.New("missing required argument plan")
	}
	if len(p.Steps) > MaxPlanSteps {
		return Plan{}, fmt.Errorf("the plan has %d steps; keep it to at most %d", len(p.Steps), MaxPlanSteps)
	}
	if len(p.Explanation) > MaxPlanExplanation {
		return Plan{}, fmt.Errorf("the explanation is %d bytes; keep it to at most %d", len(p.Explanation), MaxPlanExplanation)
	}
	p.Explanation = strings.TrimSpace(strings.ToValidUTF8(p.Explanation, "\uFFFD"))
	inProgress := 0
	for i := range p.Steps {
		s := &p.Steps[i]
		s.Step = strings.Join(strings.Fields(strings.ToValidUTF8(s.Step, "\uFFFD")), " ")
		switch {
		case s.Step == "":
			return Plan{}, fmt.Errorf("plan[%d]: the step is empty", i)
		case len(s.Step) > MaxPlanStepBytes:
			return Plan{}, fmt.Errorf("plan[%d]: the step is %d bytes; say it in a few words (at most %d bytes)", i, len(s.Step), MaxPlanStepBytes)
		}
		switch s.Status {
		case StepInProgress:
			inProgress++
		case StepPending, StepCompleted:
		default:
			return Plan{}, fmt.Errorf("plan[%d]: status %q is not pending, in_progress or completed", i, clipStatus(s.Status))
		}
	}
	if inProgress > 1 {
		return Plan{}, fmt.Errorf("%d steps are in_progress; at most one may be", inProgress)
	}
	return p, nil
}

func clipStatus(s string) string {
	if len(s) <= 40 {
		return s
	}
	i := 40
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// PlanOf returns the plan an update_plan result recorded in its Details
// ({plan: [{step, status}], explanation?}, as the ledger gives them back),
// or false when they hold none.
func PlanOf(details map[string]any) (Plan, bool) {
	steps, ok := details["plan"]
	if !ok {
		return Plan{}, false
	}
	raw, err := json.Marshal(map[string]any{"plan": steps, "explanation": details["explanation"]})
	if err != nil {
		return Plan{}, false
	}
	p, err := ParsePlan(raw)
	return p, err == nil
}
