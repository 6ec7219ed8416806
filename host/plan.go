package host

import (
	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// PlanOf is the plan of a branch: what its last successful update_plan
// call set (nil when none did). The plan is durable as that call's
// result, so a resumed session has it again, and a branch moved before
// the call has the plan from before it.
func PlanOf(branch []session.Entry) *tools.Plan { return agent.PlanOf(branch) }

// Plan is the session's current plan on its active branch (nil: none).
func (s *Session) Plan() *tools.Plan { return PlanOf(s.sess.Branch()) }
