package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestParsePlan: a plan of named steps with known statuses, at most one
// in progress, within bounds; each step folded onto one line.
func TestParsePlan(t *testing.T) {
	p, err := ParsePlan(json.RawMessage(`{"explanation":" why ","plan":[{"step":"read\n the\tcode","status":"completed"},{"step":"fix","status":"in_progress"},{"step":"test","status":"pending"}]}`))
	if err != nil || p.Explanation != "why" || len(p.Steps) != 3 || p.Steps[0].Step != "read the code" {
		t.Fatalf("ParsePlan = %+v, %v", p, err)
	}
	for _, c := range []struct{ args, want string }{
		{`{"plan":[{"step":"a","status":"in_progress"},{"step":"b","status":"in_progress"}]}`, "at most one may be"},
		{`{"plan":[{"step":"a","status":"done"}]}`, `status "done" is not`},
		{`{"plan":[{"step":" \n ","status":"pending"}]}`, "plan[0]: the step is empty"},
		{`{"plan":[{"step":"` + strings.Repeat("x", MaxPlanStepBytes+1) + `","status":"pending"}]}`, "a few words"},
		{`{"plan":[` + strings.Repeat(`{"step":"a","status":"pending"},`, MaxPlanSteps) + `{"step":"a","status":"pending"}]}`, "at most 30"},
		{`{"explanation":"x"}`, "missing required argument plan"},
		{`{"plan":[{"step":"a","status":"pending","extra":1}]}`, "unknown field"},
	} {
		if _, err := ParsePlan(json.RawMessage(c.args)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePlan(%.60s) = %v, want %q", c.args, err, c.want)
		}
		res, err := UpdatePlanTool{}.Execute(context.Background(), Invocation{Arguments: json.RawMessage(c.args)})
		if err != nil || !res.IsError || res.Plan != nil || !strings.Contains(res.Text, c.want) {
			t.Errorf("Execute(%.60s) = %+v, %v", c.args, res, err)
		}
	}
	if e, err := (UpdatePlanTool{}).Classify(json.RawMessage(`{"plan":[{"step":"a","status":"pending","extra":1}]}`)); e != Unknown || err == nil {
		t.Errorf("Classify of arguments not of the plan's shape = %v, %v", e, err)
	}
	if e, err := (UpdatePlanTool{}).Classify(json.RawMessage(`{"plan":[]}`)); e != Pure || err != nil {
		t.Errorf("Classify of an empty plan = %v, %v", e, err)
	}
}

// TestPlanOfLedgerDetails: the plan a result keeps in its Details comes
// back from their JSON form (as the ledger returns them).
func TestPlanOfLedgerDetails(t *testing.T) {
	res, err := UpdatePlanTool{}.Execute(context.Background(), Invocation{Arguments: json.RawMessage(`{"explanation":"e","plan":[{"step":"a","status":"completed"},{"step":"b","status":"pending"}]}`)})
	if err != nil || res.IsError || res.Plan == nil || res.Text != "Plan updated: 1 of 2 steps completed." {
		t.Fatalf("Execute = %+v, %v", res, err)
	}
	raw, _ := json.Marshal(res.Details)
	var back map[string]any
	json.Unmarshal(raw, &back)
	p, ok := PlanOf(back)
	if !ok || p.Explanation != "e" || len(p.Steps) != 2 || p.Steps[1] != (PlanStep{"b", "pending"}) {
		t.Errorf("PlanOf = %+v, %v", p, ok)
	}
	if _, ok := PlanOf(map[string]any{"path": "x"}); ok {
		t.Error("PlanOf found a plan in another tool's details")
	}
}
