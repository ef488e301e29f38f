package node

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// rootfs returns the directory holding img's unpacked root filesystem,
// unpacking it on first use. The cache is keyed by config digest, so an
// image is unpacked once however many tags or pods name it; localnodes
// sharing the cache directory serialise on a lock file, and a rootfs only
// appears (by rename) once complete. Cached root filesystems are never
// written to: containers get an overlay (or a copy) on top.
func (s *imageStore) rootfs(img *storedImage) (string, error) {
	key := img.id.Hex
	final := filepath.Join(s.cacheDir, key)
	done := filepath.Join(final, "rootfs")
	if _, err := os.Stat(done); err == nil {
		return done, nil
	}
	mu := s.keyLock(key)
	mu.Lock()
	defer mu.Unlock()
	if err := os.MkdirAll(s.cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create image cache %s: %w", s.cacheDir, err)
	}
	lf, err := os.OpenFile(filepath.Join(s.cacheDir, key+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("lock image cache: %w", err)
	}
	defer func() { _ = lf.Close() }()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock image cache: %w", err)
	}
	if _, err := os.Stat(done); err == nil {
		return done, nil
	}
	// What an interrupted unpack left is garbage now that we hold the lock.
	stale, _ := filepath.Glob(filepath.Join(s.cacheDir, key+".partial-*"))
	for _, p := range stale {
		_ = os.RemoveAll(p)
	}
	tmp, err := os.MkdirTemp(s.cacheDir, key+".partial-")
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w", img.ref, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	dest := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(dest, 0o755); err != nil {
		return "", fmt.Errorf("unpack %s: %w", img.ref, err)
	}
	// Extract flattens the layers and applies whiteouts; what remains is
	// one tar stream of the final filesystem.
	rc := mutate.Extract(img.img)
	err = extractTar(rc, dest)
	_ = rc.Close()
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w", img.ref, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("unpack %s: %w", img.ref, err)
	}
	s.log.Info("unpacked image", "image", img.ref, "id", img.id.String(), "dir", done)
	return done, nil
}

func (s *imageStore) keyLock(key string) *sync.Mutex {
	s.unpackMu.Lock()
	defer s.unpackMu.Unlock()
	mu, ok := s.unpackBy[key]
	if !ok {
		mu = &sync.Mutex{}
		s.unpackBy[key] = mu
	}
	return mu
}

// extractTar writes a tar stream under dest. Every path is resolved through
// an os.Root, so neither an entry name with ".." nor a symlink planted by an
// earlier entry (absolute, or relative and climbing out) can make a write
// land outside dest: such an image is refused. Device nodes are skipped
// (containers get a minimal /dev of their own).
func extractTar(r io.Reader, dest string) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		rel, err := entryPath(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		if err := extractEntry(root, tr, hdr, rel); err != nil {
			return fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
}

// entryPath cleans a tar entry name into a path relative to the root. A
// leading "/" is dropped, as a container runtime does; ".." is refused.
func entryPath(n string) (string, error) {
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			return "", fmt.Errorf("layer entry %q leaves the image root", n)
		}
	}
	clean := strings.TrimPrefix(path.Clean("/"+n), "/")
	if clean == "" {
		return ".", nil
	}
	return clean, nil
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, rel string) error {
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	switch hdr.Typeflag {
	case tar.TypeDir:
		fi, err := root.Lstat(rel)
		switch {
		case err == nil && !fi.IsDir():
			if err := root.Remove(rel); err != nil {
				return err
			}
			fallthrough
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(rel, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		}
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives still use TypeRegA
		if err := removeIfPresent(root, rel); err != nil {
			return err
		}
		f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := root.Chtimes(rel, hdr.ModTime, hdr.ModTime); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := removeIfPresent(root, rel); err != nil {
			return err
		}
		// The target is only text here; it is resolved inside the
		// container's root when used.
		return root.Symlink(hdr.Linkname, rel)
	case tar.TypeLink:
		target, err := entryPath(hdr.Linkname)
		if err != nil {
			return err
		}
		if err := removeIfPresent(root, rel); err != nil {
			return err
		}
		return root.Link(target, rel)
	default:
		return nil
	}
	// Owner first: chown clears setuid and setgid bits.
	if err := root.Lchown(rel, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	return root.Chmod(rel, mode)
}

func removeIfPresent(root *os.Root, rel string) error {
	if err := root.RemoveAll(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// copyTree copies a root filesystem for a container when overlayfs is not
// available, keeping modes, owners and symlinks. Hard links become copies.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*unix.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case fi.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(p, target); err != nil {
				return err
			}
		default:
			return nil
		}
		if st != nil {
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		return os.Chmod(target, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
