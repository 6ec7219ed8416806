package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/octet-agent/octet/agent"
)

// toolOutput shows a call's output on notes, line by line, each line
// marked as tool output; a line's unfinished end waits for the rest.
func (r *textRenderer) toolOutput(callID, text string) {
	buf := r.output[callID] + visible(text)
	for {
		line, rest, ok := strings.Cut(buf, "\n")
		if !ok {
			break
		}
		r.note("  │ %s", line)
		buf = rest
	}
	r.output[callID] = buf
}

// flushOutput shows the unfinished last line of a call's output.
func (r *textRenderer) flushOutput(callID string) {
	if rest := r.output[callID]; rest != "" {
		r.note("  │ %s", rest)
	}
	delete(r.output, callID)
}

// failure says how a failed call failed: a command's exit status, or the
// first line of the tool's error.
func (r *textRenderer) failure(callID string) string {
	if r.result == nil {
		return ""
	}
	res := r.result(callID)
	if res == nil {
		return ""
	}
	if why := commandStatus(res.Details); why != "" {
		return ": " + why
	}
	if res.Tool == "bash" {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimSpace(res.Text), "\n")
	if first == "" {
		return ""
	}
	return ": " + visible(clip(first, 200))
}

// commandStatus describes a bash result's failure from its details:
// "exit code 2", "timed out", "cancelled"; "" for anything else.
func commandStatus(d map[string]any) string {
	switch {
	case d == nil:
		return ""
	case d["timed_out"] == true:
		return "timed out"
	case d["cancelled"] == true:
		return "cancelled"
	}
	var code int64
	switch v := d["exit_code"].(type) {
	case int:
		code = int64(v)
	case int64:
		code = v
	case float64:
		code = int64(v)
	case json.Number:
		code, _ = v.Int64()
	default:
		return ""
	}
	if code == 0 {
		return ""
	}
	return fmt.Sprintf("exit code %d", code)
}

// usageLine summarizes the run's known usage and cost, or "" when the run
// made no request with known usage and none with unknown usage.
func (r *textRenderer) usageLine() string {
	u := r.usage
	if u == nil {
		if r.uncertain {
			return "usage: unknown (an interrupted request may have been billed)"
		}
		return ""
	}
	line := fmt.Sprintf("usage: input %d (cached %d), output %d (reasoning %d) tokens, cost %s",
		u.Input, u.CachedInput, u.Output, u.Reasoning, formatCostMicros(u.CostMicros))
	if !u.Complete || r.uncertain {
		line += " — a known subtotal: some usage is unknown"
	}
	return line
}

// formatCostMicros formats a cost in micro-dollars as exact dollars, or
// says it is unknown (the model has no price).
func formatCostMicros(micros *int64) string {
	if micros == nil {
		return "unknown (no price for the model)"
	}
	return agent.Picodollars(*micros * 1_000_000).String()
}
