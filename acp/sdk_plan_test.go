package acp

import (
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestSDKPlan: the model's update_plan reaches the ACP TypeScript SDK's
// client as a plan session update of the whole plan, valid against the
// ACP schema (the wires are checked), before the answer.
func TestSDKPlan(t *testing.T) {
	w := newWorld(t)
	w.prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("p1", "update_plan", `{"plan":[{"step":"Read","status":"completed"},{"step":"Fix","status":"in_progress"}]}`)),
		providertest.Text("Fixed."),
	)
	var got struct {
		Updates []struct {
			SessionUpdate string
			Entries       []struct{ Content, Priority, Status string }
		}
	}
	w.run(t, "stream", &got)
	var kinds []string
	var plan []string
	for _, u := range got.Updates {
		kinds = append(kinds, u.SessionUpdate)
		if u.SessionUpdate == "plan" {
			for _, e := range u.Entries {
				plan = append(plan, e.Status+":"+e.Content+":"+e.Priority)
			}
		}
	}
	if len(plan) != 2 || plan[0] != "completed:Read:medium" || plan[1] != "in_progress:Fix:medium" {
		t.Errorf("plan entries %q (updates %q)", plan, kinds)
	}
}
