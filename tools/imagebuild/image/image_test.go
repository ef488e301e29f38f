package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var commitTime = time.Date(2026, 11, 30, 0, 11, 55, 0, time.UTC)

// writeFile makes a stand-in binary; its content is what the layer must hold.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSpec(t *testing.T) Spec {
	t.Helper()
	ca, _ := MozillaBundle()
	return Spec{
		Binaries: []Binary{{Source: writeFile(t, "svc", "#!binary svc\n"), Path: "/svc"}},
		CABundle: ca,
		Created:  commitTime,
		Arch:     "amd64",
		Source:   "https://example.test/agentplane",
		Version:  "0.1.0",
		Revision: "0123456789abcdef",
		Title:    "svc",
	}
}

func mustBuild(t *testing.T, s Spec) v1.Image {
	t.Helper()
	img, err := Build(s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildGivesTheSameDigestForTheSameInputsOnly(t *testing.T) {
	other := writeFile(t, "other", "#!binary other\n")
	cases := []struct {
		name     string
		change   func(*Spec)
		wantSame bool
	}{
		{"same inputs built twice", func(*Spec) {}, true},
		{"the same time in another zone", func(s *Spec) { s.Created = commitTime.In(time.FixedZone("CET", 3600)) }, true},
		{"sub-second parts of the time are dropped", func(s *Spec) { s.Created = commitTime.Add(300 * time.Millisecond) }, true},
		{"another creation time", func(s *Spec) { s.Created = commitTime.Add(time.Second) }, false},
		{"another binary content", func(s *Spec) { s.Binaries[0].Source = other }, false},
		{"another revision label", func(s *Spec) { s.Revision = "fedcba9876543210" }, false},
		{"another CA bundle", func(s *Spec) { s.CABundle = append(slices.Clone(s.CABundle), '\n') }, false},
		{"another architecture", func(s *Spec) { s.Arch = "arm64" }, false},
	}
	want := digestOf(t, mustBuild(t, testSpec(t)))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			s.Binaries[0].Source = writeFile(t, "svc", "#!binary svc\n") // another file, same bytes
			tc.change(&s)
			got := digestOf(t, mustBuild(t, s))
			if (got == want) != tc.wantSame {
				t.Fatalf("digest %s, first build %s; want same=%v", got, want, tc.wantSame)
			}
		})
	}
}

func TestBinaryLayerDoesNotDependOnFlagOrder(t *testing.T) {
	a, b := writeFile(t, "a", "a"), writeFile(t, "b", "b")
	s1, s2 := testSpec(t), testSpec(t)
	s1.Binaries = []Binary{{a, "/usr/local/bin/a"}, {b, "/usr/local/bin/b"}}
	s1.Symlinks = []Symlink{{"/usr/local/bin/x", "a"}, {"/usr/local/bin/y", "b"}}
	s2.Binaries = []Binary{{b, "/usr/local/bin/b"}, {a, "/usr/local/bin/a"}}
	s2.Symlinks = []Symlink{{"/usr/local/bin/y", "b"}, {"/usr/local/bin/x", "a"}}
	s2.Entrypoint = []string{"/usr/local/bin/a"} // the default follows the first binary
	if d1, d2 := digestOf(t, mustBuild(t, s1)), digestOf(t, mustBuild(t, s2)); d1 != d2 {
		t.Fatalf("digests differ with the flags reordered: %s vs %s", d1, d2)
	}
}

// identity is what must survive writing an image out: the manifest digest
// where the format keeps the manifest (OCI layout), and the config digest
// (docker's image id) and layer digests everywhere.
type identity struct {
	manifest, config v1.Hash
	layers           []v1.Hash
}

func identify(t *testing.T, img v1.Image) identity {
	t.Helper()
	id := identity{manifest: digestOf(t, img)}
	var err error
	if id.config, err = img.ConfigName(); err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		id.layers = append(id.layers, d)
	}
	return id
}

func TestTarballAndLayoutKeepTheImage(t *testing.T) {
	img := mustBuild(t, testSpec(t))
	want := identify(t, img)
	dir := t.TempDir()
	tarPath, layoutDir := filepath.Join(dir, "svc.tar"), filepath.Join(dir, "layout")
	if err := WriteTarball(tarPath, "agentplane/svc:0.1.0", img); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(layoutDir, "agentplane/svc:0.1.0", img); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		read         func() (v1.Image, error)
		keepsManifst bool
	}{
		// docker's tarball has no manifest; readers synthesize one.
		{"docker load tarball", func() (v1.Image, error) { return tarball.ImageFromPath(tarPath, nil) }, false},
		{"OCI layout", func() (v1.Image, error) {
			p, err := layout.FromPath(layoutDir)
			if err != nil {
				return nil, err
			}
			idx, err := p.ImageIndex()
			if err != nil {
				return nil, err
			}
			im, err := idx.IndexManifest()
			if err != nil {
				return nil, err
			}
			if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "agentplane/svc:0.1.0" {
				return nil, errors.New("layout index does not name exactly this image")
			}
			return p.Image(im.Manifests[0].Digest)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			back, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			got := identify(t, back)
			if got.config != want.config || !slices.Equal(got.layers, want.layers) {
				t.Fatalf("read back config %s layers %v, built %s %v", got.config, got.layers, want.config, want.layers)
			}
			if tc.keepsManifst && got.manifest != want.manifest {
				t.Fatalf("read back manifest %s, built %s", got.manifest, want.manifest)
			}
		})
	}
	if _, err := os.Stat(tarPath + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary tarball left behind: %v", err)
	}
	t.Run("a tag is required", func(t *testing.T) {
		if err := WriteTarball(filepath.Join(dir, "x.tar"), "agentplane/svc", img); err == nil {
			t.Fatal("wrote a tarball without a tag")
		}
	})
}

func TestConfigCarriesUserEntrypointLabelsAndEnv(t *testing.T) {
	s := testSpec(t)
	s.Cmd = []string{"--addr", ":8089"}
	s.Ports = []string{"8089", "9090/udp"}
	img := mustBuild(t, s)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	cases := []struct {
		name      string
		got, want any
	}{
		{"user is nonroot by number", c.User, "65532:65532"},
		{"working dir is /", c.WorkingDir, "/"},
		{"entrypoint defaults to the first binary", c.Entrypoint, []string{"/svc"}},
		{"cmd as given", c.Cmd, []string{"--addr", ":8089"}},
		{"env has PATH and SSL_CERT_FILE", c.Env, []string{"PATH=" + DefaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}},
		{"ports default to tcp", c.ExposedPorts, map[string]struct{}{"8089/tcp": {}, "9090/udp": {}}},
		{"label source", c.Labels[LabelSource], "https://example.test/agentplane"},
		{"label version", c.Labels[LabelVersion], "0.1.0"},
		{"label revision", c.Labels[LabelRevision], "0123456789abcdef"},
		{"label title", c.Labels[LabelTitle], "svc"},
		{"label created is the commit time", c.Labels[LabelCreated], "2026-11-30T00:11:55Z"},
		{"config created is the commit time", cf.Created.UTC(), commitTime},
		{"history is dated the commit time", cf.History[len(cf.History)-1].Created.UTC(), commitTime},
		{"os", cf.OS, "linux"},
		{"architecture", cf.Architecture, "amd64"},
		{"two layers: base and binaries", len(cf.RootFS.DiffIDs), 2},
		{"rootfs type", cf.RootFS.Type, "layers"},
		{"OCI manifest", mt, types.OCIManifestSchema1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !equal(tc.got, tc.want) {
				t.Fatalf("got %#v, want %#v", tc.got, tc.want)
			}
		})
	}
}

func TestExplicitEntrypointWins(t *testing.T) {
	s := testSpec(t)
	s.Entrypoint = []string{"/svc", "serve"}
	cf, err := mustBuild(t, s).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/svc", "serve"}) {
		t.Fatalf("entrypoint %q", cf.Config.Entrypoint)
	}
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case map[string]struct{}:
		y, ok := b.(map[string]struct{})
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if _, ok := y[k]; !ok {
				return false
			}
		}
		return true
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	return a == b
}

// file is what a layer says about one entry.
type file struct {
	hdr  tar.Header
	body []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimSuffix(h.Name, "/")] = file{hdr: *h, body: body}
		}
		_ = rc.Close()
	}
	return out
}

func TestLayersHoldTheFilesWithFixedModesOwnersAndTimes(t *testing.T) {
	s := testSpec(t)
	s.Binaries = append(s.Binaries, Binary{Source: writeFile(t, "mock", "#!binary mock\n"), Path: "/usr/local/bin/mockagent"})
	s.Symlinks = []Symlink{{Path: "/usr/local/bin/claude", Target: "mockagent"}}
	files := layerFiles(t, mustBuild(t, s))

	cases := []struct {
		name     string
		typeflag byte
		mode     int64
		uid      int
		body     string
		link     string
	}{
		{"svc", tar.TypeReg, 0o755, 0, "#!binary svc\n", ""},
		{"usr", tar.TypeDir, 0o755, 0, "", ""},
		{"usr/local/bin", tar.TypeDir, 0o755, 0, "", ""},
		{"usr/local/bin/mockagent", tar.TypeReg, 0o755, 0, "#!binary mock\n", ""},
		{"usr/local/bin/claude", tar.TypeSymlink, 0o777, 0, "", "mockagent"},
		{"etc/passwd", tar.TypeReg, 0o644, 0, passwd, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, group, ""},
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, string(s.CABundle), ""},
		{"tmp", tar.TypeDir, 0o1777, 0, "", ""},
		{"home/nonroot", tar.TypeDir, 0o700, NonRootID, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := files[tc.name]
			if !ok {
				t.Fatalf("no %s in the layers", tc.name)
			}
			h := f.hdr
			if h.Typeflag != tc.typeflag || h.Mode != tc.mode || h.Linkname != tc.link {
				t.Errorf("type %q mode %o link %q, want type %q mode %o link %q", h.Typeflag, h.Mode, h.Linkname, tc.typeflag, tc.mode, tc.link)
			}
			if h.Uid != tc.uid || h.Gid != tc.uid || h.Uname != "" || h.Gname != "" {
				t.Errorf("owner %d:%d (%q:%q), want %d:%d without names", h.Uid, h.Gid, h.Uname, h.Gname, tc.uid, tc.uid)
			}
			if !h.ModTime.Equal(commitTime) {
				t.Errorf("mtime %s, want the commit time %s", h.ModTime, commitTime)
			}
			if string(f.body) != tc.body {
				t.Errorf("content %.40q, want %.40q", f.body, tc.body)
			}
		})
	}
	t.Run("passwd names nonroot 65532", func(t *testing.T) {
		if !strings.Contains(string(files["etc/passwd"].body), "\nnonroot:x:65532:65532:") ||
			!strings.Contains(string(files["etc/group"].body), "\nnonroot:x:65532:") {
			t.Fatal("nonroot missing from /etc/passwd or /etc/group")
		}
	})
	t.Run("names are relative", func(t *testing.T) {
		for name, f := range files {
			if strings.HasPrefix(f.hdr.Name, "/") || strings.Contains(name, "..") {
				t.Errorf("entry %q", f.hdr.Name)
			}
		}
	})
}

func TestBinaryUnderABaseDirectoryKeepsItsMode(t *testing.T) {
	s := testSpec(t)
	s.Binaries = []Binary{{Source: writeFile(t, "x", "x"), Path: "/tmp/x"}}
	files := layerFiles(t, mustBuild(t, s))
	// The binaries layer comes last, so a /tmp entry there would win.
	if m := files["tmp"].hdr.Mode; m != 0o1777 {
		t.Fatalf("/tmp mode %o after adding /tmp/x, want 1777", m)
	}
}

func TestBuildRejectsBadSpecs(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no binary", func(s *Spec) { s.Binaries = nil }, "no binary"},
		{"relative path", func(s *Spec) { s.Binaries[0].Path = "svc" }, "clean absolute"},
		{"unclean path", func(s *Spec) { s.Binaries[0].Path = "/usr/../svc" }, "clean absolute"},
		{"root path", func(s *Spec) { s.Binaries[0].Path = "/" }, "clean absolute"},
		{"over a base file", func(s *Spec) { s.Binaries[0].Path = "/etc/passwd" }, "already in the image"},
		{"over /tmp", func(s *Spec) { s.Symlinks = []Symlink{{"/tmp", "/svc"}} }, "already in the image"},
		{"twice", func(s *Spec) { s.Symlinks = []Symlink{{"/svc", "x"}} }, "already in the image"},
		{"under a file", func(s *Spec) { s.Symlinks = []Symlink{{"/svc/x", "y"}} }, "is a file"},
		{"symlink without target", func(s *Spec) { s.Symlinks = []Symlink{{"/x", ""}} }, "no target"},
		{"missing binary file", func(s *Spec) { s.Binaries[0].Source = filepath.Join(t.TempDir(), "nope") }, "no such file"},
		{"no creation time", func(s *Spec) { s.Created = time.Time{} }, "commit time"},
		{"no CA bundle", func(s *Spec) { s.CABundle = nil }, "CA bundle"},
		{"no architecture", func(s *Spec) { s.Arch = "" }, "architecture"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.change(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEmptyLabelsAreLeftOut(t *testing.T) {
	s := testSpec(t)
	s.Version, s.Title = "", ""
	cf, err := mustBuild(t, s).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{LabelVersion, LabelTitle} {
		if v, ok := cf.Config.Labels[k]; ok {
			t.Errorf("label %s = %q, want none", k, v)
		}
	}
	if cf.Config.Labels[LabelRevision] == "" || cf.Config.Labels[LabelCreated] == "" {
		t.Errorf("labels %v lost the revision or the creation time", cf.Config.Labels)
	}
}
