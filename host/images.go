package host

import (
	"encoding/base64"

	"github.com/octet-agent/octet/internal/images"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// Bounds of a prompt's images (internal/images): each at most 20 MiB,
// at most 8, at most 40 MiB together.
const (
	MaxImageBytes   = images.MaxBytes
	MaxImages       = images.MaxPerPrompt
	MaxImagesBytes  = images.MaxPromptBytes
	maxImageEncoded = (MaxImageBytes+2)/3*4 + 4
)

// DecodeImage decodes an image a client attached to a prompt: standard
// base64 data of a PNG, JPEG, GIF or WebP image of at most 20 MiB whose
// bytes are of mimeType ("" takes the type the bytes say). The error is
// an *InputError saying what is wrong with it.
func DecodeImage(mimeType, data string) (provider.Image, error) {
	if len(data) > maxImageEncoded {
		return provider.Image{}, inputErrorf("the image is over %d bytes (20 MiB); attach a smaller one", MaxImageBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return provider.Image{}, inputErrorf("the image's data is not standard base64: %v", err)
	}
	return NewImage(raw, mimeType)
}

// NewImage checks an image's bytes (a file's, say): a PNG, JPEG, GIF or
// WebP image of at most 20 MiB of mimeType ("" takes the type the bytes
// say). The error is an *InputError saying what is wrong with it.
func NewImage(raw []byte, mimeType string) (provider.Image, error) {
	mime, err := images.Check(raw, mimeType)
	if err != nil {
		return provider.Image{}, &InputError{Msg: err.Error()}
	}
	return provider.Image{MimeType: mime, Data: raw}, nil
}

// CheckImages refuses more images than one prompt may carry.
func CheckImages(imgs []provider.Image) error {
	if len(imgs) > MaxImages {
		return inputErrorf("the prompt has %d images; at most %d are taken", len(imgs), MaxImages)
	}
	total := 0
	for _, im := range imgs {
		total += len(im.Data)
	}
	if total > MaxImagesBytes {
		return inputErrorf("the prompt's images are %d bytes together; at most %d (40 MiB) are taken", total, MaxImagesBytes)
	}
	return nil
}

// takesImages refuses images for a session whose model does not take
// image input, as the catalog says, before anything is sent or kept.
func (s *Session) takesImages() error {
	m := s.built.Agent.Model()
	if m.Images {
		return nil
	}
	if cm, ok := s.catalog().Lookup(m.Name); ok && cm.Known {
		return inputErrorf("model %s does not take image input: choose a model that does (octet/models and octet models say which: images true), or send the prompt without images", m.Name)
	}
	return inputErrorf("octet does not know whether model %s takes image input (neither octet's model table nor a [models.%q] table of config.toml says), so it sends it none: declare images = true in that table if it does, choose a model octet knows takes images (octet/models and octet models: images true), or send the prompt without images", m.Name, m.Name)
}

// CheckImages checks the images of a prompt for the session: within the
// bounds, each an image octet takes, for a model that takes image input
// (an *InputError otherwise). Prompt checks them too; a dialect calls it
// first to refuse a prompt before it does anything else with it.
func (s *Session) CheckImages(imgs []provider.Image) error {
	if len(imgs) == 0 {
		return nil
	}
	if err := CheckImages(imgs); err != nil {
		return err
	}
	if err := s.takesImages(); err != nil {
		return err
	}
	for i, im := range imgs {
		if _, err := images.Check(im.Data, im.MimeType); err != nil {
			return inputErrorf("image %d: %v", i+1, err)
		}
	}
	return nil
}

// Image reads one of the session's kept images (a prompt's or a tool
// result's) from the image store; an error when it is no longer there.
func (s *Session) Image(ref session.Image) ([]byte, error) { return s.built.Agent.Image(ref) }
