package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

const winFakeKey = "sk-test-DO-NOT-LEAK-77aa01"

// sdFor parses sddl with "ME" standing for the current user's SID.
func sdFor(t *testing.T, sddl string) *windows.SECURITY_DESCRIPTOR {
	t.Helper()
	me, err := currentUserSID()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.SecurityDescriptorFromString(strings.ReplaceAll(sddl, "ME", me.String()))
	if err != nil {
		t.Fatalf("%s: %v", sddl, err)
	}
	return sd
}

// TestCredentialsSDRules: a security descriptor is private when the owner
// is the user (or SYSTEM or Administrators) and every allow entry that
// applies to the file names one of those; deny entries and inherit-only
// entries do not count; a NULL DACL, an entry for Everyone, Users or
// Authenticated Users, or a foreign owner is refused and named.
func TestCredentialsSDRules(t *testing.T) {
	me, err := currentUserSID()
	if err != nil {
		t.Fatal(err)
	}
	for sddl, want := range map[string]string{
		"O:MED:P(A;;FA;;;ME)":                           "",
		"O:MED:P(A;;FA;;;ME)(A;;FA;;;SY)(A;;FA;;;BA)":   "",
		"O:BAD:P(A;;FA;;;ME)":                           "",
		"O:MED:P(D;;FA;;;WD)(A;;FA;;;ME)":               "",
		"O:MED:P(A;;FA;;;ME)(A;OIIO;FA;;;WD)":           "",
		"O:MED:P(A;;FA;;;ME)(A;;FR;;;WD)":               "access granted to",
		"O:MED:P(A;;FA;;;ME)(A;;FR;;;BU)":               "access granted to",
		"O:MED:(A;;FR;;;AU)":                            "access granted to",
		"O:MED:P(A;;FA;;;ME)(A;;FA;;;S-1-5-21-1-2-3-4)": "access granted to",
		"O:WDD:P(A;;FA;;;ME)":                           "owned by",
	} {
		why, err := checkSD(sdFor(t, sddl), me)
		if err != nil || (want == "") != (why == "") || !strings.Contains(why, want) {
			t.Errorf("checkSD(%s) = %q, %v; want %q", sddl, why, err, want)
		}
	}
	// A NULL DACL (built directly: Wine's SDDL parser makes
	// "D:NO_ACCESS_CONTROL" an empty DACL, which grants nobody access).
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	if err := sd.SetOwner(me, false); err != nil {
		t.Fatal(err)
	}
	if err := sd.SetDACL(nil, true, false); err != nil {
		t.Fatal(err)
	}
	if why, err := checkSD(sd, me); err != nil || !strings.Contains(why, "no DACL") {
		t.Errorf("checkSD(NULL DACL) = %q, %v; want no DACL", why, err)
	}
	if why, _ := checkSD(sdFor(t, "O:MED:P"), me); why != "" {
		t.Errorf("checkSD(empty DACL) = %q; an empty DACL grants nobody access", why)
	}
}

// setDACL gives path exactly the protected DACL of sddl.
func setDACL(t *testing.T, path, sddl string) {
	t.Helper()
	dacl, _, err := sdFor(t, sddl).DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
}

func credHome(t *testing.T) (home, path string) {
	t.Helper()
	home, err := os.MkdirTemp("", "octet-cred")
	if err != nil {
		t.Fatal(err)
	}
	path = CredentialsPath(home)
	t.Cleanup(func() { os.Remove(path); os.Remove(home) })
	if err := os.WriteFile(path, []byte("openai_api_key = \""+winFakeKey+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, path
}

func noEnv(string) (string, bool) { return "", false }

// TestCredentialsACL: LoadCredentials reads the file's DACL from its
// handle: a file readable by Everyone is refused with the icacls command
// to run and without the key; a private one is accepted.
func TestCredentialsACL(t *testing.T) {
	home, path := credHome(t)
	setDACL(t, path, "D:P(A;;FA;;;ME)(A;;FR;;;WD)")
	_, err := LoadCredentials(home, noEnv)
	ae, ok := errors.AsType[*ACLError](err)
	if !ok {
		t.Fatalf("err = %v, want *ACLError", err)
	}
	for _, want := range []string{path, `icacls "` + path + `" /inheritance:r /grant:r "`, "access granted to"} {
		if !strings.Contains(ae.Error(), want) {
			t.Errorf("message %q lacks %q", ae, want)
		}
	}
	if strings.Contains(ae.Error(), winFakeKey) {
		t.Error("message leaks the key")
	}

	home, path = credHome(t)
	if windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil {
		// Wine 8 synthesizes a file's security descriptor from its Unix
		// mode (0644 when created: Everyone may read) and maps a DACL
		// written to it back onto the mode only through an entry for
		// Everyone: a deny entry for Everyone makes the mode 0600 and
		// the descriptor (A;;FA;;;SY)(A;;FA;;;user). (On Windows that
		// DACL would deny the user too.)
		setDACL(t, path, "D:P(D;;FA;;;WD)(A;;FA;;;ME)")
	} else {
		setDACL(t, path, "D:P(A;;FA;;;ME)(A;;FA;;;SY)")
	}
	c, err := LoadCredentials(home, noEnv)
	if err != nil || c.APIKey.Reveal() != winFakeKey {
		t.Fatalf("private file refused: %v", err)
	}
}

// TestCredentialsMissingSaysIcacls: the missing-key message names the
// Windows command, not chmod.
func TestCredentialsMissingSaysIcacls(t *testing.T) {
	home := filepath.Join(os.TempDir(), "octet-no-such-home")
	_, err := LoadCredentials(home, noEnv)
	if _, ok := errors.AsType[*MissingKeyError](err); !ok || !strings.Contains(err.Error(), "icacls") || strings.Contains(err.Error(), "chmod") {
		t.Fatalf("err = %v", err)
	}
}
