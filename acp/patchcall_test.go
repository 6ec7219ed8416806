package acp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDescribeApplyPatch: an apply_patch call is an edit whose locations
// are every file the patch names (a move's destination included), named
// in its one-line title.
func TestDescribeApplyPatch(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"input": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.txt\n*** Move to: c.txt\n*** End Patch"})
	v := describeCall("/ws", "apply_patch", args)
	if v.kind != "edit" {
		t.Errorf("kind %q", v.kind)
	}
	var paths []string
	for _, l := range v.locations {
		paths = append(paths, l["path"].(string))
	}
	if strings.Join(paths, " ") != "/ws/a.txt /ws/b.txt /ws/c.txt" {
		t.Errorf("locations %v", paths)
	}
	if v.title != "`apply_patch a.txt, b.txt, c.txt`" || strings.Contains(v.title, "\n") {
		t.Errorf("title %q", v.title)
	}
	// A patch that does not parse is shown by name only.
	if v := describeCall("/ws", "apply_patch", []byte(`{"input":"nonsense"}`)); v.title != "`apply_patch`" || len(v.locations) != 0 {
		t.Errorf("unparsable patch: %+v", v)
	}
}
