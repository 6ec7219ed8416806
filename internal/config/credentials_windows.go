package config

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// privateHint is the command that gives path a DACL granting only the
// current user access (inherited entries removed).
func privateHint(path string) string {
	return fmt.Sprintf(`run icacls "%s" /inheritance:r /grant:r "%s:F"`, path, currentUserName())
}

func currentUserName() string {
	sid, err := currentUserSID()
	if err != nil {
		return "%USERNAME%"
	}
	name, domain, _, err := sid.LookupAccount("")
	if err != nil || name == "" {
		return "%USERNAME%"
	}
	if domain != "" {
		return domain + `\` + name
	}
	return name
}

func currentUserSID() (*windows.SID, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, err
	}
	return u.User.Sid.Copy()
}

// checkPrivate reads the file's owner and DACL from its open handle and
// refuses it unless checkSD accepts them.
func checkPrivate(f *os.File, path string, _ fs.FileInfo) error {
	sd, err := windows.GetSecurityInfo(windows.Handle(f.Fd()), windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("read the security descriptor of credentials %s: %w", path, err)
	}
	me, err := currentUserSID()
	if err != nil {
		return fmt.Errorf("find the current user to check credentials %s: %w", path, err)
	}
	why, err := checkSD(sd, me)
	if err != nil {
		return fmt.Errorf("read the DACL of credentials %s: %w", path, err)
	}
	if why != "" {
		return &ACLError{Path: path, Why: why}
	}
	return nil
}

// checkSD returns why sd is not private to me, or "": the owner must be
// me, SYSTEM or Administrators, and every entry that allows access (and
// applies to the file itself) must name one of those. A missing or NULL
// DACL (access for everyone) is refused.
func checkSD(sd *windows.SECURITY_DESCRIPTOR, me *windows.SID) (string, error) {
	trusted := []*windows.SID{me}
	for _, w := range []windows.WELL_KNOWN_SID_TYPE{windows.WinLocalSystemSid, windows.WinBuiltinAdministratorsSid} {
		if s, err := windows.CreateWellKnownSid(w); err == nil {
			trusted = append(trusted, s)
		}
	}
	isTrusted := func(s *windows.SID) bool {
		for _, t := range trusted {
			if s.Equals(t) {
				return true
			}
		}
		return false
	}
	if owner, _, err := sd.Owner(); err != nil || owner == nil || !isTrusted(owner) {
		return "owned by " + accountName(owner), nil
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		return "no DACL: everyone has access", nil
	}
	var others []string
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return "", err
		}
		if ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 || !allowsAccess(ace.Header.AceType) {
			continue
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		if !isTrusted(sid) {
			others = append(others, accountName(sid))
		}
	}
	if len(others) > 0 {
		return "access granted to " + strings.Join(others, ", "), nil
	}
	return "", nil
}

// allowsAccess reports whether an ACE of type t grants access: every
// allow type (plain, object, callback, compound); deny and audit entries
// do not.
func allowsAccess(t uint8) bool {
	switch t {
	case windows.ACCESS_ALLOWED_ACE_TYPE,
		0x04, // ACCESS_ALLOWED_COMPOUND_ACE_TYPE
		0x05, // ACCESS_ALLOWED_OBJECT_ACE_TYPE
		0x09, // ACCESS_ALLOWED_CALLBACK_ACE_TYPE
		0x0B: // ACCESS_ALLOWED_CALLBACK_OBJECT_ACE_TYPE
		return true
	}
	return false
}

// accountName is DOMAIN\name for sid, or its S-1-... string.
func accountName(sid *windows.SID) string {
	if sid == nil {
		return "nobody"
	}
	if name, domain, _, err := sid.LookupAccount(""); err == nil && name != "" {
		if domain != "" {
			return domain + `\` + name
		}
		return name
	}
	return sid.String()
}
