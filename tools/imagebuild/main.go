// Command imagebuild packs static binaries into a reproducible OCI image
// without a base image, and writes it as a `docker load` tarball and,
// optionally, an OCI image layout. `make images` runs it once per service
// and tool; docs/images.md describes the images.
//
//	imagebuild --name agentplane/agent-controller:0.1.0 \
//	  --binary bin/agent-controller=/agent-controller \
//	  --created 2026-11-30T00:11:55Z --version 0.1.0 --revision $(git rev-parse HEAD) \
//	  --tarball agent-controller-0.1.0.tar
//
// It prints one line: name, manifest digest, short config id (docker's
// image id), size as pulled and size unpacked.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/agentplane/agentplane/tools/imagebuild/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "imagebuild:", err)
		}
		os.Exit(2)
	}
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string { return strings.Join(*l, " ") }

func (l *list) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var binaries, symlinks, entrypoint, cmd, ports list
	fs.Var(&binaries, "binary", "SRC=PATH: put the file SRC at PATH in the image, mode 0755 (repeatable; the first is the default entrypoint)")
	fs.Var(&symlinks, "symlink", "PATH=TARGET: a symbolic link at PATH (repeatable)")
	fs.Var(&entrypoint, "entrypoint", "one element of the entrypoint (repeatable; default: the first binary's PATH)")
	fs.Var(&cmd, "cmd", "one element of the default arguments (repeatable)")
	fs.Var(&ports, "port", "a port the program listens on, e.g. 8080 or 9090/tcp (repeatable; documentation only)")
	tag := fs.String("name", "", "image name with tag, e.g. agentplane/agent-controller:0.1.0 (required)")
	created := fs.String("created", "", "creation time, RFC 3339: the commit time, so builds repeat (required)")
	version := fs.String("version", "", "label "+image.LabelVersion)
	revision := fs.String("revision", "unknown", "label "+image.LabelRevision)
	source := fs.String("source", "https://github.com/agentplane/agentplane", "label "+image.LabelSource)
	title := fs.String("title", "", "label "+image.LabelTitle+" (default: the name's last path element)")
	arch := fs.String("arch", runtime.GOARCH, "GOARCH the binaries were built for")
	caFile := fs.String("ca-file", "", "PEM CA bundle to use instead of the Mozilla roots of golang.org/x/crypto/x509roots/fallback; the digest then depends on this file")
	tarFile := fs.String("tarball", "", "write a `docker load` tarball here")
	layoutDir := fs.String("oci-layout", "", "also write an OCI image layout to this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *tag == "" || *created == "" || (*tarFile == "" && *layoutDir == "") {
		return errors.New("--name, --created and one of --tarball or --oci-layout are required")
	}
	when, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}

	spec := image.Spec{
		Entrypoint: entrypoint,
		Cmd:        cmd,
		Ports:      ports,
		Created:    when,
		Arch:       *arch,
		Source:     *source,
		Version:    *version,
		Revision:   *revision,
		Title:      *title,
	}
	if spec.Title == "" {
		spec.Title = titleOf(*tag)
	}
	for _, b := range binaries {
		src, dst, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("--binary %q: want SRC=PATH", b)
		}
		spec.Binaries = append(spec.Binaries, image.Binary{Source: src, Path: dst})
	}
	for _, s := range symlinks {
		p, target, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("--symlink %q: want PATH=TARGET", s)
		}
		spec.Symlinks = append(spec.Symlinks, image.Symlink{Path: p, Target: target})
	}
	if *caFile != "" {
		if spec.CABundle, err = os.ReadFile(*caFile); err != nil {
			return err
		}
	} else {
		spec.CABundle, _ = image.MozillaBundle()
	}
	if _, err := image.ParseBundle(spec.CABundle); err != nil {
		return err
	}

	img, err := image.Build(spec)
	if err != nil {
		return err
	}
	if *tarFile != "" {
		if err := image.WriteTarball(*tarFile, *tag, img); err != nil {
			return err
		}
	}
	if *layoutDir != "" {
		if err := image.WriteLayout(*layoutDir, *tag, img); err != nil {
			return err
		}
	}
	sum, err := image.Summarize(*tag, img)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%-40s %s  %s  %9s  %9s\n", sum.Name, sum.Digest, sum.ID.Hex[:12],
		humanSize(sum.Size), humanSize(sum.Unpacked))
	return err
}

// titleOf turns "agentplane/agent-controller:0.1.0" into "agent-controller".
func titleOf(tag string) string {
	if i := strings.LastIndex(tag, "/"); i >= 0 {
		tag = tag[i+1:]
	}
	name, _, _ := strings.Cut(tag, ":")
	return name
}

// humanSize prints bytes in decimal megabytes, as docker and registries do.
func humanSize(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fMB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fkB", float64(n)/1e3)
	}
	return fmt.Sprintf("%dB", n)
}
