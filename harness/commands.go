package harness

import (
	_ "embed"
	"strings"
)

// The prompts of the slash commands that ask the model for a piece of
// work (a front door offers them as /init and /review).
var (
	//go:embed commands/init.md
	initPrompt string
	//go:embed commands/review.md
	reviewPrompt string
)

// CommandPrompt returns the prompt of slash command name ("init",
// "review") with the person's words after the command, if any, as what
// to focus on; ok is false for a name that is not one.
func CommandPrompt(name, focus string) (prompt string, ok bool) {
	switch name {
	case "init":
		prompt = initPrompt
	case "review":
		prompt = reviewPrompt
	default:
		return "", false
	}
	prompt = strings.TrimSpace(prompt)
	if focus = strings.TrimSpace(focus); focus != "" {
		prompt += "\n\nThe user adds: " + focus
	}
	return prompt, true
}
