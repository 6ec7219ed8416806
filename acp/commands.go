package acp

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/harness"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// command is one slash command a session offers (available_commands_update):
// a prompt whose text starts with /name runs it instead of going to the
// model as it is.
type command struct {
	name, description string
	// hint describes the text after the name (empty: none is taken).
	hint string
	// run handles the command; arg is the text after the name, rest the
	// prompt's other blocks.
	run func(as *acpSession, ctx context.Context, arg string, rest []contentBlock) (any, error)
}

// commands are octet's slash commands.
var commands = []command{
	{"compact", "Summarize the conversation so far, to free the model's context", "", (*acpSession).compact},
	{"diff", "Show what octet changed in the files during the last prompt", "", (*acpSession).showDiff},
	{"rewind", "Undo the last prompt: restore the files octet changed in it and take the conversation back to before it", "force (optional): overwrite files changed since octet wrote them", (*acpSession).rewindLast},
	{"init", "Write an AGENTS.md describing this project for coding agents (asks before writing)", "what to focus on (optional)", modelCommand("init")},
	{"review", "Review the uncommitted changes in this repository", "what to focus on (optional)", modelCommand("review")},
}

// ready tells the client what a session offers once it is open: its
// slash commands.
func (as *acpSession) ready() {
	avail := make([]map[string]any, 0, len(commands))
	for _, c := range commands {
		m := map[string]any{"name": c.name, "description": c.description}
		if c.hint != "" {
			m["input"] = map[string]any{"hint": c.hint}
		}
		avail = append(avail, m)
	}
	as.update(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": avail})
}

// slashCommand returns the command a prompt starts with (its first block
// is text beginning with /name and then a blank or its end) and the text
// after the name.
func slashCommand(blocks []contentBlock) (*command, string) {
	if len(blocks) == 0 || blocks[0].Type != "text" {
		return nil, ""
	}
	text := strings.TrimLeftFunc(blocks[0].Text, unicode.IsSpace)
	name, ok := strings.CutPrefix(text, "/")
	if !ok {
		return nil, ""
	}
	arg := ""
	if i := strings.IndexFunc(name, unicode.IsSpace); i >= 0 {
		name, arg = name[:i], strings.TrimSpace(name[i:])
	}
	for i := range commands {
		if commands[i].name == name {
			return &commands[i], arg
		}
	}
	return nil, ""
}

// modelCommand is a command that asks the model for a piece of work: its
// prompt (harness.CommandPrompt, the person's words after the name as
// what to focus on) runs as any prompt, with the prompt's other blocks.
func modelCommand(name string) func(*acpSession, context.Context, string, []contentBlock) (any, error) {
	return func(as *acpSession, ctx context.Context, arg string, rest []contentBlock) (any, error) {
		prompt, _ := harness.CommandPrompt(name, arg)
		in, err := readPrompt(as.cwd(), append([]contentBlock{{Type: "text", Text: prompt}}, rest...))
		if err != nil {
			return nil, err
		}
		return as.runInput(ctx, in)
	}
}

// compact summarizes the conversation now (/compact): a run of its own,
// answered as a prompt is, followed by a line saying what it did.
func (as *acpSession) compact(ctx context.Context, _ string, _ []contentBlock) (any, error) {
	head := as.Session().Head()
	res, err := as.runPrompt(ctx, func(ctx context.Context) (*agent.Run, error) { return as.Session().Compact(ctx, agent.PromptOptions{}) })
	if err != nil {
		return nil, err
	}
	switch {
	case res.(map[string]any)["stopReason"] != stopEndTurn:
	case as.Session().Head() == head:
		as.say("Nothing to compact yet.")
	default:
		as.say("Compacted the conversation: the model now sees a summary of it in place of the messages so far.")
	}
	return res, nil
}

// local runs a command that does not run the model, with the session's
// prompt slot held (no prompt runs meanwhile), and answers end_turn.
func (as *acpSession) local(do func() (string, error)) (any, error) {
	t := newTurn()
	if err := as.begin(t, nil); err != nil {
		return nil, err
	}
	defer as.end(t)
	text, err := do()
	if err != nil {
		return nil, err
	}
	as.say(text)
	return map[string]any{"stopReason": stopEndTurn}, nil
}

// showDiff shows what octet's tools changed in the last run (/diff): each
// file's recorded unified diff, made visible, as a Markdown code block.
func (as *acpSession) showDiff(context.Context, string, []contentBlock) (any, error) {
	return as.local(func() (string, error) {
		cs, runID, err := as.Session().Diff("")
		if err != nil {
			return "", fmt.Errorf("diff of session %s: %w", as.ID(), err)
		}
		if runID == "" || len(cs) == 0 {
			return "octet changed no file in the last prompt.", nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "octet changed %s in the last prompt:\n", plural(len(cs), "file"))
		for _, c := range cs {
			info := "diff"
			if c.DiffOmitted {
				info = "text"
			}
			fmt.Fprintf(&b, "\n%s (%s)\n%s\n", codeSpan(titleText(c.Path)), c.Kind, fenced(info, tools.ApprovalText(c.Diff)))
		}
		return b.String(), nil
	})
}

// rewindLast undoes the last prompt (/rewind): the files octet changed
// since just before it are restored and the conversation goes back to
// before it. Nothing is done when a file was changed since by someone
// else: the conflicts are listed instead, with how to rewind anyway
// (`/rewind force`, which overwrites them; a file whose earlier content
// octet does not have is then left as it is and said to be).
func (as *acpSession) rewindLast(ctx context.Context, arg string, _ []contentBlock) (any, error) {
	return as.local(func() (string, error) {
		force := false
		switch a := strings.TrimSpace(arg); a {
		case "":
		case "force":
			force = true
		default:
			return fmt.Sprintf("Nothing was rewound: /rewind takes no input, or `force` (to overwrite files changed since octet wrote them), not %s.", codeSpan(titleText(a))), nil
		}
		p, prompt, ok := as.rewindParams()
		if !ok {
			return "Nothing to rewind: no prompt yet.", nil
		}
		plan, err := as.Session().Rewind(ctx, p)
		if err != nil {
			return "", fmt.Errorf("rewind session %s: %w", as.ID(), err)
		}
		if conflicts := rewindConflicts(plan); conflicts != "" && !force {
			return "Nothing was rewound: these files cannot be rewound as they are now:\n" + conflicts + forceAdvice(plan), nil
		}
		for _, c := range plan.Changes {
			if c.Conflict != "" {
				p.Force = append(p.Force, c.Path)
			}
		}
		p.DryRun = false
		res, err := as.Session().Rewind(ctx, p)
		if err != nil {
			return "", fmt.Errorf("rewind session %s: %w", as.ID(), err)
		}
		if !res.Applied {
			return "The rewind was not completed:\n" + rewindConflicts(res), nil
		}
		return rewoundText(res, prompt, p.Conversation), nil
	})
}

// rewindParams returns the dry rewind of the last prompt: the files as
// they were before the prompt ran anything, as at the entry before it,
// or at the prompt itself when it is the first entry (the conversation
// then cannot go back before it), and the prompt as a code span; false
// when there is no prompt yet.
func (as *acpSession) rewindParams() (host.RewindParams, string, bool) {
	branch := as.Session().Branch()
	last := -1
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].Type == session.EntryUser {
			last = i
			break
		}
	}
	if last < 0 {
		return host.RewindParams{}, "", false
	}
	p := host.RewindParams{SessionID: as.ID(), EntryID: branch[last].ID, Files: true, DryRun: true}
	if last > 0 {
		p.EntryID, p.Conversation = branch[last-1].ID, true
	}
	return p, codeSpan(titleText(branch[last].Text)), true
}

// rewoundText says what a rewind of the last prompt did: the files it
// restored and those it left as they are (the paths a forced rewind
// could still not restore), and where the conversation is.
func rewoundText(res host.RewindResult, prompt string, conversation bool) string {
	var paths []string
	for _, c := range res.Changes {
		if c.Conflict == "" {
			paths = append(paths, codeSpan(titleText(c.Path)))
		}
	}
	files := "No file needed restoring."
	if len(paths) > 0 {
		files = "Restored " + strings.Join(paths, ", ") + "."
	}
	if left := rewindConflicts(res); left != "" {
		files += " Left as they are:\n" + left
	}
	if !conversation {
		return fmt.Sprintf("Rewound the files of the first prompt (%s). %s The conversation cannot go back before its first prompt: start a new session for a fresh one.", prompt, files)
	}
	return fmt.Sprintf("Rewound the last prompt (%s). %s The conversation goes on from before it.", prompt, files)
}

// forceAdvice says what `/rewind force` would do with the conflicts of
// plan: overwrite those that forcing overwrites (changes not octet's),
// and rewind the rest while leaving the others.
func forceAdvice(plan host.RewindResult) string {
	for _, c := range plan.Changes {
		if tools.Forceable(c.Conflict) {
			return "To keep them, nothing more is needed. To rewind anyway, overwriting the changes that are not octet's, send `/rewind force`."
		}
	}
	return "Do what each says, then `/rewind` again; or send `/rewind force` to rewind the other files and leave these as they are."
}

// rewindConflicts lists the paths of a rewind that conflict, one a line.
func rewindConflicts(res host.RewindResult) string {
	var b strings.Builder
	for _, c := range res.Changes {
		if c.Conflict != "" {
			fmt.Fprintf(&b, "- %s: %s\n", codeSpan(titleText(c.Path)), titleText(c.Conflict))
		}
	}
	return b.String()
}

// say sends text as an agent message of its own.
func (as *acpSession) say(text string) {
	as.update(chunk("agent_message_chunk", "octet-"+session.NewID(), text))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
