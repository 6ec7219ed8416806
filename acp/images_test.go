package acp

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// pngOf is a small real PNG image.
func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(1, 1, c)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// userImages returns the image URLs of a request's user messages.
func userImages(r providertest.Request) []string {
	var out []string
	for _, it := range r.Input() {
		m, _ := it.(map[string]any)
		if m["role"] != "user" {
			continue
		}
		parts, _ := m["content"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["type"] == "input_image" {
				out = append(out, pm["image_url"].(string))
			}
		}
	}
	return out
}

// TestImagePrompt: initialize advertises image prompts; an image block
// and an embedded resource whose blob is an image reach the model as
// input_image parts of the user's message, kept, so session/load replays
// them as image content of the user's message; an image block that is
// not an image, audio, and images for a model octet does not know takes
// images are invalid params before any request.
func TestImagePrompt(t *testing.T) {
	p := newPeer(t, stackOpts{recovery: true})
	var init struct {
		AgentCapabilities struct{ PromptCapabilities struct{ Image, Audio bool } }
	}
	p.ok("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &init)
	if pc := init.AgentCapabilities.PromptCapabilities; !pc.Image || pc.Audio {
		t.Errorf("promptCapabilities %+v: want image true, audio false", pc)
	}
	id := p.newSession()
	red, blue := pngOf(t, color.RGBA{R: 255, A: 255}), pngOf(t, color.RGBA{B: 255, A: 255})
	b64 := base64.StdEncoding.EncodeToString
	p.prov.Enqueue(providertest.Text("two squares"))
	var res struct{ StopReason string }
	p.ok("session/prompt", map[string]any{"sessionId": id, "prompt": []any{
		map[string]any{"type": "text", "text": "what are these?"},
		map[string]any{"type": "image", "mimeType": "image/png", "data": b64(red)},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///tmp/blue.png", "mimeType": "image/png", "blob": b64(blue)}},
	}}, &res)
	if res.StopReason != stopEndTurn {
		t.Fatalf("stop %q", res.StopReason)
	}
	reqs := p.prov.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := []string{"data:image/png;base64," + b64(red), "data:image/png;base64," + b64(blue)}
	if got := userImages(reqs[0]); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the request's images %q, want the red then the blue PNG", got)
	}

	for _, c := range []struct {
		block map[string]any
		want  string
	}{
		{map[string]any{"type": "image", "mimeType": "image/png", "data": b64([]byte("not an image at all"))}, "prompt[1]"},
		{map[string]any{"type": "image", "mimeType": "image/png", "data": "%%%"}, "base64"},
		{map[string]any{"type": "audio", "mimeType": "audio/wav", "data": b64([]byte("RIFF"))}, "audio"},
	} {
		m := p.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "and this?"}, c.block}})
		if m.Error == nil || m.Error.Code != codeInvalidParams || !strings.Contains(m.Error.Message, c.want) {
			t.Errorf("prompt with %v: %+v, want invalid params naming %q", c.block["type"], m.Error, c.want)
		}
	}
	if n := len(p.prov.Requests()); n != 1 {
		t.Errorf("%d requests after the refused prompts, want 1", n)
	}

	p.ok("session/load", map[string]any{"sessionId": id, "cwd": p.ws, "mcpServers": []any{}}, nil)
	var replayed []string
	for _, u := range p.updates("user_message_chunk") {
		if c, _ := u["content"].(map[string]any); c["type"] == "image" {
			replayed = append(replayed, "data:"+c["mimeType"].(string)+";base64,"+c["data"].(string))
		}
	}
	if strings.Join(replayed, "|") != strings.Join(want, "|") {
		t.Errorf("session/load replayed images %d, want the prompt's two", len(replayed))
	}
}

// TestImagePromptModelWithoutImages: a session whose model octet does
// not know to take image input refuses an image prompt with invalid
// params that say so, before any request, and keeps nothing.
func TestImagePromptModelWithoutImages(t *testing.T) {
	p := newPeer(t, stackOpts{})
	p.initialize(false)
	id := p.newSession()
	m := p.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{
		map[string]any{"type": "text", "text": "look"},
		map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(pngOf(t, color.Black))},
	}})
	if m.Error == nil || m.Error.Code != codeInvalidParams || !strings.Contains(m.Error.Message, "image input") {
		t.Errorf("image prompt for gpt-test: %+v, want invalid params about image input", m.Error)
	}
	if n := len(p.prov.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
	p.prov.Enqueue(providertest.Text("ok"))
	if stop := p.prompt(id, "hi"); stop != stopEndTurn {
		t.Errorf("prompt after the refusal: %q", stop)
	}
	p.ok("session/load", map[string]any{"sessionId": id, "cwd": p.ws, "mcpServers": []any{}}, nil)
	var users []string
	for _, u := range p.updates("user_message_chunk") {
		c, _ := u["content"].(map[string]any)
		users = append(users, fmt.Sprint(c["type"], ":", c["text"]))
	}
	if strings.Join(users, ",") != "text:hi" {
		t.Errorf("session/load replayed user chunks %q, want only the prompt that ran", users)
	}
}

// TestLargeImagePrompt: an image within octet's bounds (here 13 MiB of
// the 20 MiB one image may have) is over 16 MiB once base64 in its
// session/prompt line; the line is taken and the image reaches the
// model. It was refused as too long, answered with id null, so the
// client waited for its prompt's answer for ever.
func TestLargeImagePrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 17 MiB line")
	}
	p := newPeer(t, stackOpts{recovery: true})
	p.initialize(false)
	id := p.newSession()
	img := append(pngOf(t, color.RGBA{R: 255, A: 255}), make([]byte, 13<<20)...)
	p.prov.Enqueue(providertest.Text("a big square"))
	p.raw(rawRequest("big", "session/prompt", map[string]any{"sessionId": id, "prompt": []any{
		map[string]any{"type": "text", "text": "what is this?"},
		map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(img)},
	}}))
	got := p.awaitStray(1)[0]
	if string(got.ID) != `"big"` || got.Error != nil {
		t.Fatalf("answer %s %+v, want the prompt's", got.ID, got.Error)
	}
	if reqs := p.prov.Requests(); len(reqs) != 1 || len(userImages(reqs[0])) != 1 {
		t.Fatalf("the model was not given the image (%d requests)", len(reqs))
	}
}
