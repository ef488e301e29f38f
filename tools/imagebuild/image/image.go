// Package image assembles a minimal OCI image around static Go binaries,
// without a base image: the platform's build machines cannot pull one, and a
// static binary needs only a CA bundle, a user database and a writable /tmp.
//
// The result depends only on its inputs (the binaries, the CA bundle, the
// config and the creation time): every timestamp is the given time, every
// file is owned by a fixed id, and entries are written in a fixed order, so
// building the same commit twice gives the same digest.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Fixed paths and ids of the files every image carries.
const (
	// CABundlePath is where the CA bundle goes; Go's crypto/x509 and most
	// other TLS stacks look there on Debian-like systems, and SSL_CERT_FILE
	// names it for the rest.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// NonRootID is the uid and gid of user "nonroot", the conventional
	// unprivileged id of distroless images, which Kubernetes manifests and
	// PodSecurity "restricted" expect a non-root image to use.
	NonRootID = 65532
	// User is the config's user: numeric, so a runtime can check that it is
	// not root without reading /etc/passwd.
	User = "65532:65532"
	// DefaultPath is the image's PATH; /usr/local/bin holds the tool
	// images' extra commands.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// OCI annotation keys used as config labels.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	LabelCreated  = "org.opencontainers.image.created"
)

// passwd and group name root, nonroot and nobody: numeric ids work without
// them, but programs that look the user up (whoami, git, ssh) fail without.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// Binary is one executable to put into the image.
type Binary struct {
	// Source is the file on this machine.
	Source string
	// Path is the absolute path inside the image.
	Path string
}

// Symlink is a link inside the image, e.g. a vendor CLI's name pointing at
// the mock that answers for it.
type Symlink struct {
	// Path is the absolute path of the link.
	Path string
	// Target is what the link points to, as written (relative targets are
	// resolved against the link's directory).
	Target string
}

// Spec is everything an image is built from; equal Specs (and equal source
// files) give equal digests.
type Spec struct {
	// Binaries go into their own layer, after the base files.
	Binaries []Binary
	// Symlinks go into the binaries' layer.
	Symlinks []Symlink
	// CABundle is the PEM CA bundle written to CABundlePath.
	CABundle []byte
	// Entrypoint defaults to the first binary's path.
	Entrypoint []string
	// Cmd is the default argument list; empty leaves it unset.
	Cmd []string
	// Ports are documentation of what the program listens on ("8080/tcp").
	Ports []string
	// Created is the image's creation time and every file's mtime; use the
	// commit time, never the clock, or the digest changes on every build.
	Created time.Time
	// Arch is the GOARCH the binaries were built for.
	Arch string
	// Source, Version, Revision and Title become the OCI labels.
	Source, Version, Revision, Title string
}

// Build returns the image described by s. It reads the binaries now, so
// later changes to the files do not change the returned image.
func Build(s Spec) (v1.Image, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	created := s.Created.UTC().Truncate(time.Second)

	baseTar, err := tarLayer(baseEntries(s.CABundle), created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	binEntries, err := binaryEntries(s.Binaries, s.Symlinks)
	if err != nil {
		return nil, err
	}
	binTar, err := tarLayer(binEntries, created)
	if err != nil {
		return nil, fmt.Errorf("binaries layer: %w", err)
	}

	entrypoint := s.Entrypoint
	if len(entrypoint) == 0 {
		entrypoint = []string{s.Binaries[0].Path}
	}
	labels := map[string]string{LabelCreated: created.Format(time.RFC3339)}
	for k, v := range map[string]string{LabelSource: s.Source, LabelVersion: s.Version, LabelRevision: s.Revision, LabelTitle: s.Title} {
		if v != "" { // an empty label says nothing; leave it out
			labels[k] = v
		}
	}
	var ports map[string]struct{}
	if len(s.Ports) > 0 {
		ports = map[string]struct{}{}
		for _, p := range s.Ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			ports[p] = struct{}{}
		}
	}
	cfg := &v1.ConfigFile{
		Architecture: s.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         User,
			WorkingDir:   "/",
			Entrypoint:   entrypoint,
			Cmd:          s.Cmd,
			Env:          []string{"PATH=" + DefaultPath, "SSL_CERT_FILE=" + CABundlePath},
			Labels:       labels,
			ExposedPorts: ports,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}

	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var adds []mutate.Addendum
	for _, l := range []struct {
		tar []byte
		by  string
	}{
		{baseTar, "imagebuild: CA bundle, /etc/passwd, /etc/group, /tmp"},
		{binTar, "imagebuild: " + describe(s.Binaries, s.Symlinks)},
	} {
		layer, err := newLayer(l.tar)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: l.by},
		})
	}
	return mutate.Append(img, adds...)
}

func (s Spec) validate() error {
	var errs []error
	if len(s.Binaries) == 0 {
		errs = append(errs, errors.New("no binary given"))
	}
	if len(s.CABundle) == 0 {
		errs = append(errs, errors.New("empty CA bundle"))
	}
	if s.Created.IsZero() {
		errs = append(errs, errors.New("no creation time: pass the commit time"))
	}
	if s.Arch == "" {
		errs = append(errs, errors.New("no architecture"))
	}
	seen := map[string]bool{}
	for _, p := range baseEntries(nil) {
		seen[p.name] = true
	}
	check := func(kind, p string) {
		switch {
		case !path.IsAbs(p) || path.Clean(p) != p || p == "/":
			errs = append(errs, fmt.Errorf("%s path %q: want a clean absolute file path", kind, p))
		case seen[p[1:]]:
			errs = append(errs, fmt.Errorf("%s path %q: already in the image", kind, p))
		}
		seen[strings.TrimPrefix(p, "/")] = true
	}
	for _, b := range s.Binaries {
		check("binary", b.Path)
		if b.Source == "" {
			errs = append(errs, fmt.Errorf("binary %q: no source file", b.Path))
		}
	}
	for _, l := range s.Symlinks {
		check("symlink", l.Path)
		if l.Target == "" {
			errs = append(errs, fmt.Errorf("symlink %q: no target", l.Path))
		}
	}
	// A file cannot also be the directory of another one.
	for _, p := range slices.Sorted(maps.Keys(seen)) {
		for d := path.Dir("/" + p); d != "/"; d = path.Dir(d) {
			if seen[d[1:]] && !baseDirs[d[1:]] {
				errs = append(errs, fmt.Errorf("path /%s: %s is a file, not a directory", p, d))
			}
		}
	}
	return errors.Join(errs...)
}

func describe(bins []Binary, links []Symlink) string {
	var parts []string
	for _, b := range bins {
		parts = append(parts, b.Path)
	}
	for _, l := range links {
		parts = append(parts, l.Path+" -> "+l.Target)
	}
	slices.Sort(parts) // the history, too, must not depend on flag order
	return strings.Join(parts, ", ")
}

// entry is one tar entry; name has no leading slash, as in every image
// layer docker and containerd produce.
type entry struct {
	name     string
	typeflag byte
	mode     int64
	uid, gid int
	body     []byte
	link     string
}

// baseDirs are the directories of the base layer.
var baseDirs = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range baseEntries(nil) {
		if e.typeflag == tar.TypeDir {
			m[e.name] = true
		}
	}
	return m
}()

func baseEntries(caBundle []byte) []entry {
	dir := func(name string, mode int64) entry {
		return entry{name: name, typeflag: tar.TypeDir, mode: mode}
	}
	file := func(name string, body []byte) entry {
		return entry{name: name, typeflag: tar.TypeReg, mode: 0o644, body: body}
	}
	home := dir("home/nonroot", 0o700)
	home.uid, home.gid = NonRootID, NonRootID
	return []entry{
		dir("etc", 0o755),
		file("etc/group", []byte(group)),
		file("etc/passwd", []byte(passwd)),
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		file(strings.TrimPrefix(CABundlePath, "/"), caBundle),
		dir("home", 0o755),
		home,
		// Sticky and world-writable, like every /tmp: programs (and Go's
		// os.TempDir) expect to create files there as any user.
		dir("tmp", 0o1777),
	}
}

// binaryEntries reads the binaries and lays them out with their parent
// directories (0755) and the symlinks, sorted by name so the layer is the
// same whatever order the flags came in.
func binaryEntries(bins []Binary, links []Symlink) ([]entry, error) {
	var out []entry
	dirs := map[string]bool{}
	addDirs := func(p string) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			// The base layer's directories keep their modes (/tmp's 1777).
			if !dirs[d] && !baseDirs[d[1:]] {
				dirs[d] = true
				out = append(out, entry{name: d[1:], typeflag: tar.TypeDir, mode: 0o755})
			}
		}
	}
	for _, b := range bins {
		body, err := os.ReadFile(b.Source)
		if err != nil {
			return nil, fmt.Errorf("binary %s: %w", b.Path, err)
		}
		addDirs(b.Path)
		out = append(out, entry{name: b.Path[1:], typeflag: tar.TypeReg, mode: 0o755, body: body})
	}
	for _, l := range links {
		addDirs(l.Path)
		out = append(out, entry{name: l.Path[1:], typeflag: tar.TypeSymlink, mode: 0o777, link: l.Target})
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// tarLayer writes entries as an uncompressed tar with every time set to
// mtime and no user or group names, so nothing of the build machine leaks in.
func tarLayer(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		name := e.name
		if e.typeflag == tar.TypeDir {
			name += "/"
		}
		hdr := &tar.Header{
			Typeflag: e.typeflag,
			Name:     name,
			Linkname: e.link,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			Size:     int64(len(e.body)),
			ModTime:  mtime,
			// PAX keeps long names and large ids exact; without extra
			// records it writes the same bytes as USTAR.
			Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newLayer gzips the tar once (at the best level: images are built once
// and pulled many times) and keeps the result, so the digest, the tarball
// and the OCI layout all see the same bytes without compressing again.
func newLayer(raw []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func countBytes(rc io.ReadCloser) (int64, error) {
	defer func() { _ = rc.Close() }()
	return io.Copy(io.Discard, rc)
}
