package main

import (
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// demoPace spaces the scripted frames so the answer visibly streams while
// the whole demo stays well under ten seconds.
const demoPace = 10 * time.Millisecond

// demoPrompt is the user prompt the demo sends.
const demoPrompt = "The greeting in greet.go looks wrong. Please fix it."

// demoInterruptedText is the partial answer of the attempt the scripted
// provider cuts off; it comes back as recovered output, never as answer.
const demoInterruptedText = "I can see the problem: the greeting says \"Helo\" instead of \"Hello\". I will change that line"

// demoScript is the scripted provider's side of the demo, one turn per
// provider request:
//
//  1. a short answer and a read of greet.go;
//  2. an answer cut off mid-stream (the connection drops): the agent's
//     recovery envelope (agent.CodexRecovery; the demo asserts the Codex
//     runtime profile) replaces the attempt, records its usage as unknown,
//     and its partial text is shown as recovered output;
//  3. the replacement answer proposing an edit (which needs approval);
//  4. the closing answer.
func demoScript() []providertest.Turn {
	interrupted := providertest.Reply(providertest.Message(demoInterruptedText))
	// response.created, response.in_progress, output_item.added and
	// content_part.added, then ten word deltas, then the connection drops.
	interrupted = interrupted.DropAfter(4 + 10)
	turns := []providertest.Turn{
		providertest.Reply(
			providertest.Message("Let me look at the greeting code first."),
			providertest.FunctionCall("call_read_greet", "read", `{"path":"greet.go"}`),
		),
		interrupted,
		providertest.Reply(
			providertest.Message(`The greeting misspells "Hello" as "Helo". Here is a one-line fix:`),
			providertest.FunctionCall("call_edit_greet", "edit",
				`{"path":"greet.go","old_text":"return \"Helo, \" + name + \"!\"","new_text":"return \"Hello, \" + name + \"!\""}`),
		),
		providertest.Text("Done: if you approved the edit, greeting() now returns \"Hello, world!\"; " +
			"if you denied it, greet.go is unchanged and the session records the denial."),
	}
	for i := range turns {
		turns[i] = turns[i].Pace(demoPace)
	}
	return turns
}
