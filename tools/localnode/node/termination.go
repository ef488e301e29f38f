package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// A container's termination message, as a kubelet keeps it: each instance
// gets an empty file of its own, writable by any user, bind-mounted at the
// container's terminationMessagePath; when the instance ends, the file's
// last maxTerminationMessage bytes become the message of its terminated
// state. Under terminationMessagePolicy FallbackToLogsOnError, a failed
// container that left the file empty gets the tail of its log instead.
// The file lives in the instance dir, so a node that adopts the instance
// reads it too.

const (
	// terminationFile is the instance's termination message file, in its
	// instance dir.
	terminationFile = "termination-log"
	// maxTerminationMessage is what a kubelet reads of the file.
	maxTerminationMessage = 4 << 10
	// fallbackLogLines and fallbackLogBytes bound the log tail a kubelet
	// takes under FallbackToLogsOnError.
	fallbackLogLines = 80
	fallbackLogBytes = 2 << 10
)

// createTerminationFile creates the empty termination message file in an
// instance dir, writable whatever user the container runs as.
func createTerminationFile(dir string) error {
	p := filepath.Join(dir, terminationFile)
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		return fmt.Errorf("create termination message file: %w", err)
	}
	// The umask narrowed the mode above.
	if err := os.Chmod(p, 0o666); err != nil {
		return fmt.Errorf("create termination message file: %w", err)
	}
	return nil
}

// terminationMounts bind-mounts the instance's termination message file
// (in dir) at c's terminationMessagePath; none when it has none (the API
// server defaults it, so every container has one) or it is not absolute.
func terminationMounts(c *corev1.Container, dir string) []mountSpec {
	if !filepath.IsAbs(c.TerminationMessagePath) {
		return nil
	}
	return []mountSpec{{Source: filepath.Join(dir, terminationFile), Target: c.TerminationMessagePath, Optional: true}}
}

// terminationMessage is the message c's ended instance in left, by c's
// terminationMessagePolicy; "" when it left none. The log is read without
// following, so a cancelled ctx (a pod stopping) does not cut it short.
func terminationMessage(ctx context.Context, c *corev1.Container, in *instance) string {
	var msg []byte
	if filepath.IsAbs(c.TerminationMessagePath) {
		msg, _ = readLast(filepath.Join(in.dir, terminationFile), maxTerminationMessage)
	}
	// A container that could not even start has no log to fall back to.
	started := in.exit.Reason != "StartError" && in.exit.Reason != reasonNoCommand
	if len(msg) == 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError && in.exit.ExitCode != 0 && started {
		var buf bytes.Buffer
		if err := writeLog(ctx, &buf, in.logPath, logOptions{tail: fallbackLogLines}); err == nil {
			msg = buf.Bytes()[max(buf.Len()-fallbackLogBytes, 0):]
		}
	}
	return string(msg)
}

// withTerminationMessage adds what the container said to the message the
// node has of its end, as a kubelet joins the runtime's and the
// container's.
func withTerminationMessage(runtime, container string) string {
	switch {
	case container == "":
		return runtime
	case runtime == "":
		return container
	}
	return runtime + ": " + container
}

// readLast reads the last n bytes of the file at path.
func readLast(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	off := max(fi.Size()-n, 0)
	return io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
}
