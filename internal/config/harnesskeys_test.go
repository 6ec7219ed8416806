package config

import (
	"slices"
	"strings"
	"testing"
)

func TestReasoningSummaryKey(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil || c.ReasoningSummary != (Setting[string]{"auto", SourceDefault}) {
		t.Fatalf("default reasoning_summary = %+v (%v)", c.ReasoningSummary, err)
	}
	c, err = load(t, `reasoning_summary = "detailed"`, `reasoning_summary = "none"`, nil, Flags{})
	if err != nil || c.ReasoningSummary != (Setting[string]{"none", SourceProjectConfig}) {
		t.Errorf("project over global = %+v (%v)", c.ReasoningSummary, err)
	}
	_, err = load(t, "reasoning_summary = \"verbose\"\n", "", nil, Flags{})
	if err == nil || !strings.Contains(err.Error(), `config.toml:1: reasoning_summary: "verbose" is not one of auto, concise, detailed, none`) {
		t.Errorf("bad value: %v", err)
	}
}

// TestApplyPatchKey: apply_patch defaults to auto; a project may turn it
// off but not on; off, or either file gate, drops the tool.
func TestApplyPatchKey(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil || c.ApplyPatch.Value != "auto" || !slices.Contains(c.EnabledTools(), "apply_patch") {
		t.Fatalf("default: %+v, enabled %v (%v)", c.ApplyPatch, c.EnabledTools(), err)
	}
	c, err = load(t, `apply_patch = "off"`, `apply_patch = "on"`, nil, Flags{})
	if err != nil || c.ApplyPatch.Value != "off" || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "apply_patch ignored: a project may only turn it off") {
		t.Errorf("project on over global off: %+v %q (%v)", c.ApplyPatch, c.Warnings, err)
	}
	if slices.Contains(c.EnabledTools(), "apply_patch") {
		t.Error("apply_patch = off still enables the tool")
	}
	c, _ = load(t, "", `apply_patch = "off"`, nil, Flags{})
	if c.ApplyPatch != (Setting[string]{"off", SourceProjectConfig}) {
		t.Errorf("project off = %+v", c.ApplyPatch)
	}
	for _, gate := range []string{"allow_edit = false", "allow_write = false"} {
		c, _ = load(t, gate, "", nil, Flags{})
		if slices.Contains(c.EnabledTools(), "apply_patch") {
			t.Errorf("%s leaves apply_patch enabled", gate)
		}
	}
}
