package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// the module version from the build info is used.
var version = ""

func versionString() string {
	v := version
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if rev != "" {
		v += " " + rev
	}
	return fmt.Sprintf("octet %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func runVersion(args []string, e env) error {
	const synopsis = "octet version"
	if _, err := parseSub(newFlagSet("version", synopsis, e.stdout), synopsis, args, 0); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, versionString())
	return nil
}
