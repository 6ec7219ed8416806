//go:build unix

package main

import (
	"encoding/base64"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// inputImages returns the image URLs of a request's input, in order: of
// user messages' content and of function call outputs.
func inputImages(r providertest.Request) []string {
	var out []string
	for _, it := range r.Input() {
		m, _ := it.(map[string]any)
		parts, _ := m["content"].([]any)
		if o, ok := m["output"].([]any); ok {
			parts = o
		}
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["type"] == "input_image" {
				out = append(out, pm["image_url"].(string))
			}
		}
	}
	return out
}

func dataURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

// TestImagesLSP: an image attached to octet/prompt reaches the model as
// an input_image item; view_image (offered to a model that takes images)
// gives the model a workspace image in its call's output; both are kept
// in the image store, so a later request, from a restarted octet lsp,
// carries them again; a model without image input (one only the endpoint
// lists) is refused an image before any request, is not offered
// view_image, and is shown the history's images as a note.
func TestImagesLSP(t *testing.T) {
	srv := providertest.New(t)
	srv.SetModels("gpt-5", "local-llm")
	attached, onDisk := pngImage(t, color.RGBA{R: 255, A: 255}), pngImage(t, color.RGBA{B: 255, A: 255})
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "shot.png"), onDisk, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(
		providertest.Text("a red line"),
		providertest.Reply(providertest.FunctionCall("v1", "view_image", `{"path":"shot.png"}`)),
		providertest.Text("a blue line"),
		providertest.Text("still two images"),
		providertest.Text("text only"),
	)
	image := map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(attached)}
	c, stop := lspIn(t, srv, home, ws, false)
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws, "model": "gpt-5"}, nil, nil)["sessionId"].(string)
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "what is this?", "context": []any{image}}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt with an image: %v", res)
	}
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "and shot.png?"}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt: %v", res)
	}
	// Refused before anything: a type the bytes contradict, too many.
	bad := map[string]any{"type": "image", "mimeType": "image/jpeg", "data": image["data"]}
	if e := c.callError("octet/prompt", map[string]any{"sessionId": sid, "text": "x", "context": []any{bad}}); e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "declared \"image/jpeg\"") {
		t.Errorf("an image of another type than declared: %v", e)
	}
	if e := c.callError("octet/prompt", map[string]any{"sessionId": sid, "text": "x", "context": slices.Repeat([]any{image}, 9)}); !strings.Contains(e["message"].(string), "at most 8") {
		t.Errorf("nine images: %v", e)
	}
	stop()

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := inputImages(reqs[0]); !slices.Equal(got, []string{dataURL(attached)}) {
		t.Errorf("first request's images: %.80q", got)
	}
	if msgs := inputMessages(reqs[0]); msgs[len(msgs)-1] != [2]string{"user", "what is this?"} {
		t.Errorf("the image is not with its prompt: %q", msgs)
	}
	if !slices.Contains(toolNames(reqs[1]), "view_image") {
		t.Errorf("view_image not offered to gpt-5: %v", toolNames(reqs[1]))
	}
	if got := inputImages(reqs[2]); !slices.Equal(got, []string{dataURL(attached), dataURL(onDisk)}) {
		t.Errorf("after view_image the request's images are %d: %.80q", len(got), got)
	}
	if out := functionCallOutput(reqs[2], "v1"); !strings.Contains(out, "shot.png: image/png") {
		t.Errorf("view_image's output text: %q", out)
	}
	stored, _ := os.ReadDir(filepath.Join(home, "images"))
	if len(stored) != 2 {
		t.Errorf("the image store holds %d files, want 2", len(stored))
	}

	// A restarted octet lsp: the images come from the store again.
	c, stop = lspIn(t, srv, home, ws, false)
	defer stop()
	c.call("octet/session/resume", map[string]any{"sessionId": sid}, nil, nil)
	c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "still there?"}, nil, nil)
	if got := inputImages(srv.Requests()[3]); !slices.Equal(got, []string{dataURL(attached), dataURL(onDisk)}) {
		t.Errorf("after a restart the request carries %d images", len(got))
	}
	// A model without image input: refused before any request, not
	// offered view_image, and told what it does not see.
	c.call("octet/setModel", map[string]any{"sessionId": sid, "model": "local-llm"}, nil, nil)
	e := c.callError("octet/prompt", map[string]any{"sessionId": sid, "text": "and this?", "context": []any{image}})
	if e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "does not know whether model local-llm takes image input") {
		t.Errorf("an image for local-llm: %v", e)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("the refused prompt reached the endpoint: %d requests", n)
	}
	c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "text only"}, nil, nil)
	last := srv.Requests()[4]
	if len(inputImages(last)) != 0 || slices.Contains(toolNames(last), "view_image") {
		t.Errorf("local-llm got images %d, tools %v", len(inputImages(last)), toolNames(last))
	}
	if in := string(last.Raw); !strings.Contains(in, "[1 image not shown: model local-llm does not take image input]") {
		t.Errorf("local-llm is not told of the images it does not see: %.2000s", in)
	}
}

// functionCallOutput is the text of call callID's output in a request
// (the text part when the output is content parts).
func functionCallOutput(r providertest.Request, callID string) string {
	for _, it := range r.Input() {
		m, _ := it.(map[string]any)
		if m["type"] != "function_call_output" || m["call_id"] != callID {
			continue
		}
		switch o := m["output"].(type) {
		case string:
			return o
		case []any:
			for _, p := range o {
				if pm, _ := p.(map[string]any); pm["type"] == "input_text" {
					return pm["text"].(string)
				}
			}
		}
	}
	return ""
}
