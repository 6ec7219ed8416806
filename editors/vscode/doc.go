// Package vscode holds the octet VS Code extension (TypeScript, in src/)
// and its end-to-end test, which runs the packaged extension in a real
// VS Code (code-server) driven by headless Chromium: see e2e_test.go and
// README.md. It has no Go API.
package vscode
