// Package build compiles the control-plane binaries (etcd, kube-apiserver,
// kube-controller-manager, kubectl) from their Go modules through the module
// proxy, once, into a versioned cache directory.
//
// There is no image registry and no prebuilt download on the machines this
// project targets, so the binaries come from source. A build is slow (minutes)
// and the result is reused: the cache entry carries a manifest of SHA-256
// sums, and an entry that fails the check is rebuilt rather than trusted.
package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

// ManifestName is the file inside a cache entry that records what was built.
const ManifestName = "manifest.json"

// Manifest records the versions and checksums of one cache entry.
type Manifest struct {
	KubeVersion string            `json:"kubeVersion"`
	EtcdVersion string            `json:"etcdVersion"`
	GoVersion   string            `json:"goVersion"`
	BuiltAt     time.Time         `json:"builtAt"`
	SHA256      map[string]string `json:"sha256"`
}

// Options say what to build and where.
type Options struct {
	// Dir is the cache entry to fill, e.g. ~/.cache/agentplane/kube/v1.36.3-etcd-v3.6.8.
	Dir string
	// WorkDir holds the generated build modules (kept for incremental rebuilds).
	WorkDir string
	// KubeVersion is the k8s.io/kubernetes release, e.g. v1.36.3.
	KubeVersion string
	// EtcdVersion is the go.etcd.io/etcd/server/v3 release, e.g. v3.6.8.
	EtcdVersion string
	// Binaries lists the names every entry must contain.
	Binaries []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// DefaultOptions builds the pinned versions into kubeassets.Dir; progress
// goes to log.
func DefaultOptions(log io.Writer) Options {
	return Options{
		Dir:         kubeassets.Dir(),
		WorkDir:     filepath.Join(kubeassets.CacheRoot(), "kube", "src"),
		KubeVersion: kubeassets.KubeVersion,
		EtcdVersion: kubeassets.EtcdVersion,
		Binaries:    kubeassets.Binaries,
		Log:         log,
	}
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Check reports whether dir is a complete, uncorrupted cache entry for opts.
// The error says what is wrong with it.
func Check(opts Options) error {
	raw, err := os.ReadFile(filepath.Join(opts.Dir, ManifestName))
	if err != nil {
		return fmt.Errorf("no manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	if m.KubeVersion != opts.KubeVersion || m.EtcdVersion != opts.EtcdVersion {
		return fmt.Errorf("manifest is for kube %s / etcd %s, want %s / %s", m.KubeVersion, m.EtcdVersion, opts.KubeVersion, opts.EtcdVersion)
	}
	for _, b := range opts.Binaries {
		want, ok := m.SHA256[b]
		if !ok {
			return fmt.Errorf("manifest lists no checksum for %s", b)
		}
		got, err := fileSHA256(filepath.Join(opts.Dir, b))
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		if got != want {
			return fmt.Errorf("%s checksum mismatch (corrupt cache entry)", b)
		}
	}
	return nil
}

// Ensure returns once opts.Dir holds a valid entry, building it if it is
// missing or corrupt. Concurrent callers serialise on a lock file.
func Ensure(ctx context.Context, opts Options) error {
	if err := os.MkdirAll(filepath.Dir(opts.Dir), 0o755); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	unlock, err := lock(opts.Dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()

	checkErr := Check(opts)
	if checkErr == nil {
		return nil
	}
	if _, statErr := os.Stat(opts.Dir); statErr == nil {
		opts.logf("kubestack: cache entry %s is unusable (%v); rebuilding", opts.Dir, checkErr)
	}
	return build(ctx, opts)
}

func build(ctx context.Context, opts Options) error {
	staging := opts.Dir + ".partial"
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("clear %s: %w", staging, err)
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", staging, err)
	}

	kubeDir := filepath.Join(opts.WorkDir, "kubernetes-"+opts.KubeVersion)
	if err := writeKubeModule(kubeDir, opts.KubeVersion); err != nil {
		return err
	}
	etcdDir := filepath.Join(opts.WorkDir, "etcd-"+opts.EtcdVersion)
	if err := writeEtcdModule(etcdDir, opts.EtcdVersion); err != nil {
		return err
	}

	start := time.Now()
	opts.logf("kubestack: resolving k8s.io/kubernetes %s modules", opts.KubeVersion)
	if err := goCmd(ctx, kubeDir, opts.step("resolving k8s.io/kubernetes "+opts.KubeVersion+" modules (go mod tidy)", 0), "mod", "tidy"); err != nil {
		return fmt.Errorf("resolve k8s.io/kubernetes %s: %w", opts.KubeVersion, err)
	}
	kubeCmds := []string{"kube-apiserver", "kube-controller-manager", "kubectl"}
	flags := []string{"-trimpath", "-ldflags", kubeLDFlags(opts.KubeVersion)}
	var pkgs []string
	for _, cmd := range kubeCmds {
		pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+cmd)
	}
	what := strings.Join(kubeCmds, ", ") + " " + opts.KubeVersion
	opts.logf("kubestack: building %s (a few minutes the first time)", what)
	total := countToCompile(ctx, kubeDir, opts.step("counting the packages of "+what+" to compile", 0), flags, pkgs)
	args := append(append([]string{"build", "-v"}, flags...), "-o", staging+string(filepath.Separator))
	if err := goCmd(ctx, kubeDir, opts.step("building "+what, total), append(args, pkgs...)...); err != nil {
		return fmt.Errorf("build kubernetes %s: %w", opts.KubeVersion, err)
	}
	opts.logf("kubestack: building etcd %s", opts.EtcdVersion)
	if err := goCmd(ctx, etcdDir, opts.step("resolving etcd "+opts.EtcdVersion+" modules (go mod tidy)", 0), "mod", "tidy"); err != nil {
		return fmt.Errorf("resolve etcd %s: %w", opts.EtcdVersion, err)
	}
	etcdFlags := []string{"-trimpath", "-ldflags", "-s -w"}
	total = countToCompile(ctx, etcdDir, opts.step("counting the packages of etcd "+opts.EtcdVersion+" to compile", 0), etcdFlags, []string{"."})
	args = append(append([]string{"build", "-v"}, etcdFlags...), "-o", filepath.Join(staging, "etcd"), ".")
	if err := goCmd(ctx, etcdDir, opts.step("building etcd "+opts.EtcdVersion, total), args...); err != nil {
		return fmt.Errorf("build etcd %s: %w", opts.EtcdVersion, err)
	}

	m := Manifest{KubeVersion: opts.KubeVersion, EtcdVersion: opts.EtcdVersion, GoVersion: runtime.Version(), BuiltAt: time.Now().UTC(), SHA256: map[string]string{}}
	for _, b := range opts.Binaries {
		sum, err := fileSHA256(filepath.Join(staging, b))
		if err != nil {
			return fmt.Errorf("build produced no %s: %w", b, err)
		}
		m.SHA256[b] = sum
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(staging, ManifestName), raw, 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	// Swap the finished entry in whole, so a crash never leaves a half entry
	// that looks valid.
	if err := os.RemoveAll(opts.Dir); err != nil {
		return fmt.Errorf("remove old entry: %w", err)
	}
	if err := os.Rename(staging, opts.Dir); err != nil {
		return fmt.Errorf("install entry: %w", err)
	}
	opts.logf("kubestack: built %s in %s", opts.Dir, time.Since(start).Round(time.Second))
	return nil
}

// kubeLDFlags stamps the release into the binaries: a plain `go build`
// reports v0.0.0-master, which breaks clients (Helm kubeVersion checks) that
// read the server version.
func kubeLDFlags(version string) string {
	major, minor := "", ""
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean", pkg, version, pkg, major, pkg, minor, pkg)
	}
	return b.String()
}

// StagingModules are the k8s.io modules that k8s.io/kubernetes keeps in its
// staging tree and replaces with local paths. Outside that tree each must be
// replaced by its published release of the same minor (v0.X.Y for v1.X.Y).
var StagingModules = []string{
	"api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
	"cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
	"controller-manager", "cri-api", "cri-client", "cri-streaming", "csi-translation-lib",
	"dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
	"kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet", "metrics",
	"mount-utils", "pod-security-admission", "sample-apiserver", "sample-cli-plugin",
	"sample-controller", "streaming",
}

// KubeModuleFile renders the go.mod of the module that builds kubernetes.
func KubeModuleFile(kubeVersion string) string {
	staging := "v0" + strings.TrimPrefix(kubeVersion, "v1")
	var b strings.Builder
	fmt.Fprintf(&b, "module agentplane.local/kubebuild\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\n", kubeVersion)
	mods := append([]string(nil), StagingModules...)
	sort.Strings(mods)
	for _, m := range mods {
		fmt.Fprintf(&b, "replace k8s.io/%s => k8s.io/%s %s\n", m, m, staging)
	}
	return b.String()
}

func writeKubeModule(dir, version string) error {
	files := map[string]string{
		"go.mod": KubeModuleFile(version),
		"tools.go": "//go:build tools\n\n// Package kubebuild pins the kubernetes commands to build.\npackage kubebuild\n\nimport (\n" +
			"\t_ \"k8s.io/kubernetes/cmd/kube-apiserver\"\n\t_ \"k8s.io/kubernetes/cmd/kube-controller-manager\"\n\t_ \"k8s.io/kubernetes/cmd/kubectl\"\n)\n",
	}
	return writeModule(dir, files)
}

func writeEtcdModule(dir, version string) error {
	files := map[string]string{
		"go.mod": fmt.Sprintf("module agentplane.local/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n", version),
		"main.go": "// Command etcd is the etcd server, built from its server module.\npackage main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\n" +
			"func main() { etcdmain.Main(os.Args) }\n",
	}
	return writeModule(dir, files)
}

// writeModule writes files, keeping an existing go.sum when go.mod is
// unchanged so a rebuild does not resolve modules again.
func writeModule(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if old, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || string(old) != files["go.mod"] {
		_ = os.Remove(filepath.Join(dir, "go.sum"))
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// step returns the progress reporter of one go command, starting now.
func (o Options) step(what string, total int) *progress {
	return newProgress(o.Log, what, total, time.Now(), reportEvery)
}

// goCmd runs the go command outside any workspace, with static linking,
// feeding its output to rep, which reports on it while it runs. On failure
// the error carries the tail of the command's output.
func goCmd(ctx context.Context, dir string, rep *progress, args ...string) error {
	cmd := goCommand(ctx, dir, args...)
	// One writer for both streams: exec then calls it from one goroutine
	// at a time, and the output stays in the order the go command wrote it.
	cmd.Stdout, cmd.Stderr = rep, rep
	if err := runReporting(cmd, rep); err != nil {
		return fmt.Errorf("go %s: %w\n%s", args[0], err, tail(rep.Output(), 40))
	}
	return nil
}

func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	return cmd
}

// runReporting runs cmd while rep reports every second it is due.
func runReporting(cmd *exec.Cmd, rep *progress) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		rep.watch(ticker.C, done)
	}()
	err := cmd.Run()
	close(done)
	<-watched
	return err
}

// countToCompile is how many packages `go build flags pkgs` will compile:
// the dependencies of pkgs that the build cache does not hold (go list's
// Stale). It is the denominator of the build's progress, so when it cannot
// be had the build goes on without one (0).
func countToCompile(ctx context.Context, dir string, rep *progress, flags, pkgs []string) int {
	args := append(append([]string{"list", "-deps", "-f", "{{.Stale}}"}, flags...), pkgs...)
	cmd := goCommand(ctx, dir, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, rep
	if err := runReporting(cmd, rep); err != nil {
		return 0
	}
	return strings.Count(out.String(), "true\n")
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lock takes an exclusive advisory lock on path, so two test runs never
// build into the same entry at once.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
