package agent

import (
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
)

// FuzzDecide feeds arbitrary typed provider failures to the policy and
// checks the envelope's invariants: no panic, never more than 35
// replacements or a maxAttempts above 35, permanent codes never replayed,
// 5xx/408 always unknown usage, a valid Retry-After never shortened.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(3), uint8(8), 0, "", "", true, uint8(0), int64(0), uint8(40))
	f.Add(uint8(2), uint8(5), 503, "", "try again in 2s", true, uint8(0), int64(90_000), uint8(40))
	f.Add(uint8(3), uint8(9), 0, "misalignment_policy_violation", "please retry", true, uint8(0), int64(0), uint8(2))
	f.Add(uint8(1), uint8(1), 0, "", "", false, uint8(0), int64(0), uint8(200))
	f.Add(uint8(3), uint8(6), 0, "", "", true, uint8(1), int64(0), uint8(13))
	f.Add(uint8(2), uint8(5), 408, "rate_limit_exceeded", "try again in 500ms", true, uint8(0), int64(-5), uint8(3))
	f.Fuzz(func(t *testing.T, phase, class uint8, status int, code, msg string, dispatched bool, decode uint8, retryAfterMs int64, n uint8) {
		pe := &provider.Error{
			Phase: provider.Phase(phase % 5), Class: provider.Class(class % 20), Status: status,
			Code: code, Message: msg, Dispatched: dispatched, Decode: provider.DecodeKind(decode % 4),
		}
		if retryAfterMs > 0 {
			pe.RetryAfter, pe.HasRetryAfter = time.Duration(retryAfterMs%10_000_000)*time.Millisecond, true
		}
		clk := &testClock{t: time.Unix(0, 0)}
		p := NewCodexRecovery(RecoveryConfig{
			Profile: ProfileCodex, Wire: provider.WireResponses, Model: provider.Model{Name: "m", Features: provider.FeatureCodexProfile},
			Endpoint: provider.FeatureCodexProfile, Seed: 1, Now: clk.now, MaxNetworkWait: time.Hour,
		})
		replacements := 0
		for range int(n) {
			d := p.Decide(Failure{Err: pe, Dispatched: dispatched})
			if pe.Permanent() && d.Retry {
				t.Fatalf("permanent code %q replayed", code)
			}
			if pe.Class == provider.HTTPStatus && (status >= 500 || status == 408) && !d.UsageUnknown {
				t.Fatalf("status %d with known usage", status)
			}
			if !d.Retry {
				if d.Err == nil {
					t.Fatal("refusal without an error")
				}
				return
			}
			if d.Delay < 0 || (pe.HasRetryAfter && d.Kind == RetryInterruptedInference && d.Delay < pe.RetryAfter) {
				t.Fatalf("delay %v (Retry-After %v)", d.Delay, pe.RetryAfter)
			}
			if d.Kind == RetryInterruptedInference {
				replacements++
				if d.MaxAttempts == nil || *d.MaxAttempts > MaxTotalReplacements || d.Attempt > *d.MaxAttempts || replacements > MaxTotalReplacements {
					t.Fatalf("replacement %d: attempt %d max %v", replacements, d.Attempt, d.MaxAttempts)
				}
			} else if d.Kind != RetryWaitingForNetwork || d.MaxAttempts != nil {
				t.Fatalf("decision %+v", d)
			}
			clk.advance(d.Delay)
		}
	})
}
