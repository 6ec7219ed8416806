package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// ImageStore keeps the images of prompts and tool results by the hex
// SHA-256 of their bytes (internal/images.Store, $OCTET_HOME/images): the
// session names them, the store holds them.
type ImageStore interface {
	Put(data []byte) (name string, err error)
	Get(name string) ([]byte, error)
}

// ErrNoImageStore is returned by Prompt for images when the agent keeps
// none (Config.Images is nil).
var ErrNoImageStore = errors.New("agent: this agent keeps no images (Config.Images is nil)")

// imageRefs resolves an entry's image references for a request: the
// images it carries and a note for its text ("" for none).
type imageRefs func(refs []session.Image) (imgs []provider.Image, note string)

// countImages stands an empty image for each reference, for estimates.
func countImages(refs []session.Image) ([]provider.Image, string) {
	return make([]provider.Image, len(refs)), ""
}

// describeImages names the images in words (what a summary request is
// given: the images themselves are not worth resending for it).
func describeImages(refs []session.Image) ([]provider.Image, string) {
	var parts []string
	for _, r := range refs {
		parts = append(parts, fmt.Sprintf("%s, %d bytes", r.MimeType, r.Bytes))
	}
	return nil, "[images here, not repeated: " + strings.Join(parts, "; ") + "]"
}

// imageMode names how a request for model m resolves images, so that the
// item cache holds only items resolved one way.
func imageMode(m provider.Model) string {
	if m.Images {
		return "images"
	}
	return "no images: " + m.Name
}

// imagesFor resolves images for a request of model m: read from the
// store for a model that takes image input (an image no longer there is
// a note), else a note saying what is not shown.
func (a *Agent) imagesFor(m provider.Model) imageRefs {
	if !m.Images {
		return func(refs []session.Image) ([]provider.Image, string) {
			return nil, fmt.Sprintf("[%s not shown: model %s does not take image input]", countOf(len(refs), "image"), m.Name)
		}
	}
	return func(refs []session.Image) ([]provider.Image, string) {
		var out []provider.Image
		var missing []string
		for _, r := range refs {
			data, err := a.getImage(r.SHA256)
			if err != nil {
				a.log.Warn("agent: image not sent", "image", r.SHA256, "err", err)
				missing = append(missing, r.SHA256[:min(12, len(r.SHA256))])
				continue
			}
			out = append(out, provider.Image{MimeType: r.MimeType, Data: data})
		}
		if len(missing) > 0 {
			return out, fmt.Sprintf("[%s no longer in octet's image store, not shown: %s]", countOf(len(missing), "image"), strings.Join(missing, ", "))
		}
		return out, ""
	}
}

// Image reads a kept image's bytes from the image store (an error when
// it is gone or there is no store).
func (a *Agent) Image(ref session.Image) ([]byte, error) { return a.getImage(ref.SHA256) }

func (a *Agent) getImage(name string) ([]byte, error) {
	if a.cfg.Images == nil {
		return nil, ErrNoImageStore
	}
	return a.cfg.Images.Get(name)
}

// keepImages puts images in the store and returns their references.
func (a *Agent) keepImages(imgs []provider.Image) ([]session.Image, error) {
	if len(imgs) == 0 {
		return nil, nil
	}
	if a.cfg.Images == nil {
		return nil, ErrNoImageStore
	}
	refs := make([]session.Image, 0, len(imgs))
	for _, im := range imgs {
		name, err := a.cfg.Images.Put(im.Data)
		if err != nil {
			return nil, err
		}
		refs = append(refs, session.Image{MimeType: im.MimeType, SHA256: name, Bytes: int64(len(im.Data))})
	}
	return refs, nil
}

// resultImages keeps a tool result's images, or says in its text why
// they could not be kept.
func (a *Agent) resultImages(res *tools.Result) []session.Image {
	if len(res.Images) == 0 {
		return nil
	}
	imgs := make([]provider.Image, len(res.Images))
	for i, im := range res.Images {
		imgs[i] = provider.Image{MimeType: im.MimeType, Data: im.Data}
	}
	refs, err := a.keepImages(imgs)
	if err != nil {
		a.log.Warn("agent: a tool result's images were not kept", "err", err)
		res.Text += fmt.Sprintf("\n\n[the image could not be kept, so it is not shown: %v]", err)
		return nil
	}
	return refs
}

// countOf is "1 image", "2 images".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
