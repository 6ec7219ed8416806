//go:build !linux && !darwin

package main

// hardenProcess has no portable equivalent of Linux's PR_SET_DUMPABLE;
// docs/security.md says what that leaves readable on other systems.
func hardenProcess() error { return nil }
