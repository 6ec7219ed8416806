package config

import "testing"

// FuzzParseConfig checks that no config text panics the strict decoder and
// that every error it returns carries the file name.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("model = \"x\"\neffect_policy = \"controlled\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := parseFile("c.toml", data, BuiltinTools)
		if err != nil {
			if fe := err.Error(); len(fe) < 6 || fe[:6] != "c.toml" {
				t.Fatalf("error without file name: %q", fe)
			}
			return
		}
		c := Defaults()
		fc.apply(&c, SourceConfig)
		fc.tighten(&c)
	})
}
