// Package conversation saves a vendor CLI's conversation when a run ends:
// the CLI's state dir under HOME, packed as the tar.gz that the init
// step's conversation restore unpacks, POSTed to <source>/<id> on the
// run's conversation store.
package conversation

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrNoStateDir says there is nothing to save: the state dir does not
// exist under HOME (the CLI never wrote a session).
var ErrNoStateDir = errors.New("the vendor's state dir does not exist")

// member is one archive entry: its name relative to HOME, with slashes.
type member struct {
	name string
	dir  bool
}

// Pack writes a gzip'd tar of home/stateDir to w. Its members are the
// state dir itself and every directory and regular file beneath it, named
// relative to home with slashes (directories end in "/"), sorted by those
// names, with their permission bits and modification times (to the
// second), owned by uid and gid 0. Symlinks, sockets, devices and pipes
// are left out and never followed; the state dir and each of its parents
// below home must be real directories. A file that disappears while the archive is
// built is left out. ctx is checked between members, so a cancelled or
// expired context cuts a long pack short.
//
// It returns an error wrapping ErrNoStateDir when home/stateDir does not
// exist.
func Pack(ctx context.Context, w io.Writer, home, stateDir string) error {
	rel := filepath.Clean(filepath.FromSlash(stateDir))
	if stateDir == "" || !filepath.IsLocal(rel) {
		return fmt.Errorf("state dir %q is not a path below HOME", stateDir)
	}
	if err := realDirs(home, rel); err != nil {
		return err
	}
	members, err := walk(home, rel)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	for _, m := range members {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pack the conversation: %w", err)
		}
		if err := writeMember(tw, home, m); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack the conversation: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("pack the conversation: %w", err)
	}
	return nil
}

// realDirs checks that every component of rel below home is a directory
// and not a symlink, so the archive holds what is under HOME and nothing a
// link points at.
func realDirs(home, rel string) error {
	p := home
	for _, part := range splitPath(rel) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNoStateDir, filepath.ToSlash(rel))
		}
		if err != nil {
			return fmt.Errorf("pack the conversation: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("pack the conversation: %s is not a directory (symlinks are not followed)", p)
		}
	}
	return nil
}

// splitPath splits a clean relative path into its components.
func splitPath(rel string) []string {
	var parts []string
	for rel != "." && rel != "" {
		dir, base := filepath.Split(rel)
		parts = append(parts, base)
		rel = filepath.Clean(dir)
	}
	slices.Reverse(parts)
	return parts
}

// tarName is the member's name in the archive: a directory's ends in "/".
func (m member) tarName() string {
	if m.dir {
		return m.name + "/"
	}
	return m.name
}

// walk lists the state dir, its directories and its regular files, sorted
// by name.
func walk(home, rel string) ([]member, error) {
	var out []member
	root := filepath.Join(home, rel)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != root && errors.Is(err, fs.ErrNotExist) {
				return nil // gone while we looked
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // symlink, socket, device, pipe
		}
		r, err := filepath.Rel(home, p)
		if err != nil {
			return err
		}
		out = append(out, member{name: filepath.ToSlash(r), dir: d.IsDir()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pack the conversation: %w", err)
	}
	// By the names the archive holds, so its member names are sorted as
	// they stand; a directory ("d/") still comes before its contents.
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.tarName(), b.tarName()) })
	return out, nil
}

// writeMember adds one directory or regular file. A file is opened
// without following a symlink and described by what was opened, so a file
// swapped for a link after the walk is not read through it.
func writeMember(tw *tar.Writer, home string, m member) error {
	p := filepath.Join(home, filepath.FromSlash(m.name))
	if m.dir {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pack the conversation: %w", err)
		}
		if !fi.IsDir() {
			return nil
		}
		return writeHeader(tw, m.tarName(), tar.TypeDir, fi, 0)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil // gone, or now a symlink
	}
	if err != nil {
		return fmt.Errorf("pack the conversation: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("pack the conversation: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := writeHeader(tw, m.name, tar.TypeReg, fi, fi.Size()); err != nil {
		return err
	}
	// A file still growing is cut at the size its header states.
	if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
		return fmt.Errorf("pack the conversation: %s: %w", m.name, err)
	}
	return nil
}

func writeHeader(tw *tar.Writer, name string, typ byte, fi fs.FileInfo, size int64) error {
	h := &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     int64(fi.Mode().Perm()),
		Size:     size,
		// Whole seconds, as plain tar keeps them: truncated, never
		// rounded into the future.
		ModTime: fi.ModTime().Truncate(time.Second),
		Uid:     0,
		Gid:     0,
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("pack the conversation: %s: %w", name, err)
	}
	return nil
}
