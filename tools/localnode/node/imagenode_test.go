package node_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/tools/localnode/node"
)

// The image node is a second node of the test package's control plane
// with an image store (holding a test image built here from
// testdata/podprobe) and pod networking. It is tainted so the shared
// node's tests never land on it; its tests bind their pods by nodeName.
const (
	imageNodeName = "imagenode"
	probeImage    = "agentplane/podprobe:test"
	layoutImage   = "example.com/agentplane/podprobe-layout:test"
)

var (
	imageNodeOnce sync.Once
	imageNode     *node.Node
	imageNodeErr  error
	imageStateDir string
)

// startImageNode builds the test image and starts the image node once.
func startImageNode(t *testing.T) {
	t.Helper()
	imageNodeOnce.Do(func() { imageNodeErr = bootImageNode() })
	if imageNodeErr != nil {
		t.Fatalf("image node: %v", imageNodeErr)
	}
}

func bootImageNode() error {
	dir, err := os.MkdirTemp("", "localnode-imagenode-")
	if err != nil {
		return err
	}
	imageStateDir = dir
	store := filepath.Join(dir, "store")
	img, err := buildProbeImage(filepath.Join(dir, "build"))
	if err != nil {
		return err
	}
	tag, err := name.NewTag(probeImage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(store, 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(filepath.Join(store, "podprobe-test.tar"), tag, img); err != nil {
		return fmt.Errorf("write image tarball: %w", err)
	}
	lp, err := layout.Write(filepath.Join(store, "podprobe-layout"), empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": layoutImage})); err != nil {
		return err
	}
	level := slog.LevelError
	if os.Getenv("LOCALNODE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	imageNode, err = node.Start(context.Background(), node.Config{
		RESTConfig: env.Config, Name: imageNodeName, StateDir: filepath.Join(dir, "state"),
		ImageDirs: []string{store}, Network: &node.NetworkConfig{},
		Taints: []corev1.Taint{{Key: "localnode.test/imagenode", Effect: corev1.TaintEffectNoSchedule}},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	return err
}

// stopImageNode stops the image node if a test started it; TestMain calls
// it so no container process or network namespace outlives the package.
func stopImageNode() {
	if imageNode != nil {
		imageNode.Stop()
	}
	if imageStateDir != "" {
		_ = os.RemoveAll(imageStateDir)
	}
}

// onImageNode binds a pod to the image node.
func onImageNode(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.NodeName = imageNodeName
	return pod
}

// buildProbeImage compiles testdata/podprobe statically and packs it in
// an image like `make images` builds (FROM scratch, nonroot user), plus a
// marker file, a group membership and a relative /bin symlink.
func buildProbeImage(dir string) (v1.Image, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "podprobe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/podprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build podprobe: %w: %s", err, out)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name, link string
		mode       int64
		uid        int
		data       []byte
		typ        byte
	}{
		{name: "etc/", mode: 0o755, typ: tar.TypeDir},
		{name: "tmp/", mode: 0o1777, typ: tar.TypeDir},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, typ: tar.TypeDir},
		{name: "usr/bin/", mode: 0o755, typ: tar.TypeDir},
		{name: "bin", link: "usr/bin", typ: tar.TypeSymlink},
		{name: "usr/bin/podprobe", mode: 0o755, data: prog, typ: tar.TypeReg},
		{name: "etc/passwd", mode: 0o644, typ: tar.TypeReg, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, typ: tar.TypeReg, data: []byte("root:x:0:\nnonroot:x:65532:\nextra:x:4000:nonroot\n")},
		{name: "etc/podprobe-marker", mode: 0o644, typ: tar.TypeReg, data: []byte("from the image\n")},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.uid, Typeflag: e.typ, Size: int64(len(e.data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Config(img, v1.Config{
		Entrypoint: []string{"podprobe"}, Cmd: []string{"info"},
		Env:        []string{"PATH=/usr/local/bin:/bin", "FROM_IMAGE=yes", "OVERRIDE=image"},
		WorkingDir: "/work", User: "65532:65532",
	})
}
