package nvim

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestImageAttachment: #image:path sends the file's bytes as an image of
// the prompt (relative to the workspace or absolute; lengths whose base64
// needs one and two "=" of padding), which the model gets as input_image
// items; #image: of a file that is not an image sends nothing and says
// why.
func TestImageAttachment(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\xff\xfe\x00"
	one, two := png+strings.Repeat("\x80", 1), png+strings.Repeat("\x7f", 2)
	if len(one)%3 == len(two)%3 || len(one)%3 == 0 || len(two)%3 == 0 {
		t.Fatalf("lengths %d and %d do not cover both paddings", len(one), len(two))
	}
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "one.png"), one)
		writeFile(t, filepath.Join(w.ws, "two.png"), two)
		writeFile(t, filepath.Join(w.ws, "notes.txt"), "not an image\n")
		w.prov.Enqueue(providertest.Text("Two tiny images."))
		r := w.run(t, "image_test.lua")
		in := inputText(t, w.prov, 0)
		for _, img := range []string{one, two} {
			if url := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte(img)); !strings.Contains(in, `"image_url":"`+url+`"`) {
				t.Errorf("the request lacks the image %s:\n%.3000s", url, in)
			}
		}
		if n := len(w.prov.Requests()); n != 1 {
			t.Errorf("%d requests: the prompt with a text file as an image was sent", n)
		}
		if !strings.Contains(r.str("notes"), "the prompt was not sent: ") || !strings.Contains(r.str("notes"), "notes.txt is not a PNG, JPEG, GIF or WebP image") {
			t.Errorf("notification: %q", r.str("notes"))
		}
		if strings.Contains(r.str("chat"), "and #image:notes.txt?") {
			t.Errorf("the refused prompt is in the chat:\n%s", r.str("chat"))
		}
	})
}
