package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageStore finds container images by reference in local directories of
// `docker save` tarballs and OCI image layouts: nothing is ever pulled. A
// reference the store does not hold leaves the container in host mode.
type imageStore struct {
	dirs     []string
	cacheDir string
	log      *slog.Logger

	mu sync.Mutex
	// files remembers what each tarball or layout held, keyed by path, so
	// a rescan reads only what changed since.
	files    map[string]scannedFile
	byRef    map[string]imageSource
	lastScan time.Time

	unpackMu sync.Mutex
	unpackBy map[string]*sync.Mutex
}

// scannedFile is what one tarball or layout held when it last changed.
type scannedFile struct {
	stamp string
	refs  map[string]imageSource
}

// imageSource says where an image lives: a tarball and one of its tags, or
// a layout and a manifest digest.
type imageSource struct {
	path   string
	tag    *name.Tag
	digest v1.Hash
}

// storedImage is an image found in the store, with its configuration.
type storedImage struct {
	// ref is the reference the pod named.
	ref string
	// id is the config digest ("sha256:…"): it names the root filesystem,
	// since the config lists every layer's diff ID.
	id     v1.Hash
	config v1.Config
	img    v1.Image
}

// rescanEvery limits how often a miss rereads the directories: host-mode
// containers miss on every start.
const rescanEvery = 2 * time.Second

func newImageStore(dirs []string, cacheDir string, log *slog.Logger) *imageStore {
	return &imageStore{dirs: dirs, cacheDir: cacheDir, log: log, files: map[string]scannedFile{}, byRef: map[string]imageSource{}, unpackBy: map[string]*sync.Mutex{}}
}

// normalizeRef turns a reference into the fully qualified form both pods
// and tarballs are compared in ("agentplane/x:1" and
// "index.docker.io/agentplane/x:1" are one image); "" when it does not parse.
func normalizeRef(ref string) string {
	r, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return ""
	}
	return r.Name()
}

// lookup returns the image ref names, or nil when the store does not hold
// it. An error means the store holds it but cannot read it.
func (s *imageStore) lookup(ref string) (*storedImage, error) {
	if s == nil || len(s.dirs) == 0 {
		return nil, nil
	}
	key := normalizeRef(ref)
	if key == "" {
		return nil, nil
	}
	s.mu.Lock()
	src, ok := s.byRef[key]
	if !ok && time.Since(s.lastScan) > rescanEvery {
		s.scan()
		src, ok = s.byRef[key]
	}
	if !ok && strings.Contains(ref, "@") {
		src, ok = s.byDigest(ref)
	}
	s.mu.Unlock()
	if !ok {
		return nil, nil
	}
	img, err := src.open()
	if err != nil {
		return nil, fmt.Errorf("image %s in %s: %w", ref, src.path, err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("image %s in %s: config digest: %w", ref, src.path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s in %s: config: %w", ref, src.path, err)
	}
	return &storedImage{ref: ref, id: id, config: cf.Config, img: img}, nil
}

// byDigest finds an image named by digest ("repo@sha256:…"): layouts know
// their manifest digests; tarball images compute theirs. Callers hold mu.
func (s *imageStore) byDigest(ref string) (imageSource, bool) {
	d, err := name.NewDigest(ref, name.WeakValidation)
	if err != nil {
		return imageSource{}, false
	}
	want := d.DigestStr()
	for _, src := range s.byRef {
		if src.tag == nil && src.digest.String() == want {
			return src, true
		}
		if src.tag != nil {
			img, err := src.open()
			if err != nil {
				continue
			}
			if got, err := img.Digest(); err == nil && got.String() == want {
				return src, true
			}
		}
	}
	return imageSource{}, false
}

func (src imageSource) open() (v1.Image, error) {
	if src.tag != nil {
		return tarball.ImageFromPath(src.path, src.tag)
	}
	return layout.Path(src.path).Image(src.digest)
}

// scan rereads the store's directories, reopening only tarballs and
// layouts whose size or modification time changed. Callers hold mu.
func (s *imageStore) scan() {
	s.lastScan = time.Now()
	seen := map[string]bool{}
	for _, dir := range s.dirs {
		if isLayout(dir) {
			s.scanFile(dir, seen)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case e.IsDir() && isLayout(p):
				s.scanFile(p, seen)
			case !e.IsDir() && strings.HasSuffix(e.Name(), ".tar"):
				s.scanFile(p, seen)
			}
		}
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}
	s.byRef = map[string]imageSource{}
	for _, f := range s.files {
		for k, v := range f.refs {
			s.byRef[k] = v
		}
	}
}

func isLayout(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "oci-layout"))
	return err == nil
}

// scanFile indexes one tarball or layout unless it is unchanged.
func (s *imageStore) scanFile(p string, seen map[string]bool) {
	seen[p] = true
	stamp := fileStamp(p)
	if f, ok := s.files[p]; ok && f.stamp == stamp {
		return
	}
	var refs map[string]imageSource
	var err error
	if isLayout(p) {
		refs, err = layoutRefs(p)
	} else {
		refs, err = tarballRefs(p)
	}
	if err != nil {
		// Perhaps still being written: try again on the next scan.
		s.log.Debug("image store: skipping unreadable image", "path", p, "err", err)
		delete(s.files, p)
		return
	}
	s.files[p] = scannedFile{stamp: stamp, refs: refs}
}

// fileStamp changes whenever a file (or a layout's index) is rewritten.
func fileStamp(p string) string {
	if fi, err := os.Stat(filepath.Join(p, "index.json")); err == nil {
		return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	}
	if fi, err := os.Stat(p); err == nil {
		return fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return ""
}

// tarballRefs lists the tags of a `docker save` tarball.
func tarballRefs(p string) (map[string]imageSource, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p) })
	if err != nil {
		return nil, err
	}
	refs := map[string]imageSource{}
	for _, d := range m {
		for _, t := range d.RepoTags {
			tag, err := name.NewTag(t, name.WeakValidation)
			if err != nil {
				continue
			}
			refs[tag.Name()] = imageSource{path: p, tag: &tag}
		}
	}
	if len(refs) == 0 {
		return nil, errors.New("tarball names no tagged image")
	}
	return refs, nil
}

// layoutRefs lists the images of an OCI layout by their ref.name
// annotation (a full reference) or containerd's image.name annotation.
func layoutRefs(p string) (map[string]imageSource, error) {
	idx, err := layout.ImageIndexFromPath(p)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	refs := map[string]imageSource{}
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() {
			continue
		}
		for _, a := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
			if k := normalizeRef(d.Annotations[a]); k != "" && strings.ContainsAny(d.Annotations[a], "/:") {
				refs[k] = imageSource{path: p, digest: d.Digest}
			}
		}
	}
	return refs, nil
}
