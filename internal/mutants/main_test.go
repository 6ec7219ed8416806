package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataFileApplies keeps the data file in step with the code: every
// mutant parses, names an existing file and applies exactly where it
// says, and every equivalent one gives its reason. (Whether each builds
// and is killed is the runner's job: .ci/mutants.)
func TestDataFileApplies(t *testing.T) {
	ms, err := parseFile("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 100 {
		t.Fatalf("only %d mutants parsed", len(ms))
	}
	ci := 0
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(m.file)))
		if err != nil {
			t.Errorf("mutants.txt:%d: %v", m.line, err)
			continue
		}
		if _, err := apply(string(src), m); err != nil {
			t.Errorf("mutants.txt:%d: %s %s: %v (update the mutant with the code it guards)", m.line, m.file, m.name, err)
		}
		if m.ci {
			ci++
			if m.equivalent != "" {
				t.Errorf("mutants.txt:%d: %s is equivalent but tagged ci", m.line, m.name)
			}
		}
	}
	if ci == 0 || ci > 45 {
		t.Errorf("%d mutants tagged ci; keep the CI subset small (under 5 minutes) but not empty", ci)
	}
}

func TestApplyAnchorsAndUniqueness(t *testing.T) {
	src := "a := 1\nif x {\n\treturn a\n}\nif y {\n\treturn a\n}\n"
	cases := []struct {
		m       mutant
		want    string
		wantErr string
	}{
		{mutant{from: "return a", to: "return 0"}, "", "not unique"},
		{mutant{near: []string{"if y {"}, from: "return a", to: "return 0"}, "a := 1\nif x {\n\treturn a\n}\nif y {\n\treturn 0\n}\n", ""},
		{mutant{near: []string{"if x {", "return a"}, from: "return a", to: "return 1"}, "a := 1\nif x {\n\treturn a\n}\nif y {\n\treturn 1\n}\n", ""},
		{mutant{near: []string{"if"}, from: "return a", to: ""}, "", "anchor \"if\" is not unique"},
		{mutant{from: "missing", to: "x"}, "", "not found"},
		{mutant{from: "a := 1", to: ""}, "\nif x {\n\treturn a\n}\nif y {\n\treturn a\n}\n", ""},
	}
	for _, c := range cases {
		got, err := apply(src, c.m)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("apply(%+v) error %v, want %q", c.m, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("apply(%+v) = %q, %v; want %q", c.m, got, err, c.want)
		}
	}
}

func TestParseRejectsMistakes(t *testing.T) {
	for name, data := range map[string]string{
		"mutant before file": "mutant x\n\t- a\n\t+ b\n",
		"no from":            "file f.go ./p\nmutant x\n\t+ b\n",
		"changes nothing":    "file f.go ./p\nmutant x\n\t- a\n\t+ a\n",
		"two from lines":     "file f.go ./p\nmutant x\n\t- a\n\t- b\n\t+ c\n",
		"duplicate name":     "file f.go ./p\nmutant x\n\t- a\n\t+ b\nmutant x\n\t- c\n\t+ d\n",
		"unknown key":        "file f.go ./p\nmutant x\n\t? a\n",
		"bad run":            "file f.go ./p\nrun (\n",
	} {
		if _, err := parse(strings.NewReader(data)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	ms, err := parse(strings.NewReader("timeout 1m\nfile f.go ./p\nrun ^TestA$\nmutant x ci\n\t@ anchor\n\t- a b\n\t+\n\tequivalent why\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("parse: %v, %d mutants", err, len(ms))
	}
	m := ms[0]
	if m.name != "x" || !m.ci || m.run != "^TestA$" || m.timeout != "1m" || m.from != "a b" || m.to != "" || m.equivalent != "why" || len(m.near) != 1 {
		t.Errorf("parsed %+v", m)
	}
}
