package initstep

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxArchiveBytes bounds what one archive may unpack to, so a hostile or
// broken source cannot fill the pod's disk.
const maxArchiveBytes = 1 << 30

// extract unpacks a tar.gz stream into dir. Only directories and regular
// files are written; every member must stay below dir and, when prefix is
// set, below dir/prefix (a conversation archive may only touch the
// vendor's state dir). Links, devices and the like are skipped: a symlink
// member is how archives usually escape their target.
func extract(r io.Reader, dir, prefix string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a gzip archive: %w", err)
	}
	defer func() { _ = zr.Close() }()
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name, ok := memberPath(h.Name, prefix)
		if !ok {
			return fmt.Errorf("archive member %q is outside %q", h.Name, prefix)
		}
		if name == "" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("extract: %w", err)
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxArchiveBytes {
				return fmt.Errorf("archive unpacks to more than %d bytes", maxArchiveBytes)
			}
			if err := writeMember(tr, target, h); err != nil {
				return err
			}
		}
	}
}

// memberPath cleans a member name; ok is false when it leaves the archive
// root or the prefix.
func memberPath(name, prefix string) (string, bool) {
	if path.IsAbs(name) {
		return "", false
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", true
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	if prefix == "" || clean == prefix || strings.HasPrefix(clean, prefix+"/") {
		return clean, true
	}
	// Parents of the prefix (".claude" of ".claude/projects") are fine:
	// nothing is written for them, the prefix's own entries create them.
	if strings.HasPrefix(prefix, clean+"/") {
		return "", true
	}
	return "", false
}

func writeMember(r io.Reader, target string, h *tar.Header) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	// O_EXCL-free but never through a symlink: remove what is there first.
	_ = os.Remove(target)
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscallNoFollow, os.FileMode(h.Mode)&0o777|0o600)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	if _, err := io.CopyN(f, r, h.Size); err != nil {
		_ = f.Close()
		return fmt.Errorf("extract %s: %w", h.Name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	if !h.ModTime.IsZero() {
		_ = os.Chtimes(target, h.ModTime, h.ModTime)
	}
	return nil
}
