package image

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Summary is what a build reports about an image.
type Summary struct {
	// Name is the tag, e.g. agentplane/agent-controller:0.1.0.
	Name string
	// Digest is the manifest digest, what a registry and a pod's imageID
	// show, and what two builds of one commit must agree on.
	Digest v1.Hash
	// ID is the config digest, which `docker image inspect` reports as Id
	// after `docker load`.
	ID v1.Hash
	// Size is manifest, config and compressed layers: what a pull moves.
	Size int64
	// Unpacked is the sum of the uncompressed layers.
	Unpacked int64
}

// Summarize computes the Summary of img under the tag name.
func Summarize(name string, img v1.Image) (Summary, error) {
	s := Summary{Name: name}
	var err error
	if s.Digest, err = img.Digest(); err != nil {
		return s, err
	}
	if s.ID, err = img.ConfigName(); err != nil {
		return s, err
	}
	m, err := img.RawManifest()
	if err != nil {
		return s, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return s, err
	}
	s.Size = int64(len(m) + len(c))
	layers, err := img.Layers()
	if err != nil {
		return s, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return s, err
		}
		s.Size += n
		rc, err := l.Uncompressed()
		if err != nil {
			return s, err
		}
		u, err := countBytes(rc)
		if err != nil {
			return s, err
		}
		s.Unpacked += u
	}
	return s, nil
}

// WriteTarball writes img as a `docker load` tarball tagged tag, through a
// temporary file so an interrupted build never leaves a truncated image.
func WriteTarball(file, tag string, img v1.Image) error {
	// Docker cannot load an image without an explicit tag, and a default
	// "latest" would hide a missing version.
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", tag, err)
	}
	if !strings.Contains(tag[strings.LastIndex(tag, "/")+1:], ":") {
		return fmt.Errorf("image name %q: no tag", tag)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	return os.Rename(tmp, file)
}

// WriteLayout writes img to an OCI image layout directory, with tag as its
// ref.name annotation. The index names this image only; blobs of earlier
// builds in dir stay, unreferenced.
func WriteLayout(dir, tag string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	}))
}
