package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// dataLink is the symlink through which a volume's files are reached; it
// names the current payload directory, as in a kubelet's AtomicWriter.
const dataLink = "..data"

// writeVolume writes files under dir atomically, as a kubelet does for
// Secret, ConfigMap, downward-API and projected volumes: the files go into
// a fresh hidden payload directory, "..data" is switched to it with one
// rename, and each top-level name is a symlink through "..data". A reader
// (the container, through its bind mount) sees the old set or the new one,
// never a torn file, when a token is refreshed. Modes default to 0644; with
// an fsGroup, files belong to that group, as a kubelet makes them, so a
// mode such as 0440 is readable by the pod's runAsUser.
func writeVolume(dir string, files []volumeFile, defaultMode *int32, group *int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	payload, err := os.MkdirTemp(dir, "..payload-")
	if err != nil {
		return fmt.Errorf("create volume payload dir: %w", err)
	}
	if err := os.Chmod(payload, 0o755); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, f := range files {
		clean := filepath.Clean(f.path)
		// Like the API's validation: no absolute paths, nothing starting
		// with "..", which also keeps payload names clear of ours.
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
			_ = os.RemoveAll(payload)
			return fmt.Errorf("volume file path %q escapes the volume", f.path)
		}
		top[strings.Split(clean, "/")[0]] = true
		if err := writePayloadFile(payload, clean, f, defaultMode, group); err != nil {
			_ = os.RemoveAll(payload)
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	if err := swapSymlink(filepath.Join(dir, dataLink), filepath.Base(payload)); err != nil {
		_ = os.RemoveAll(payload)
		return err
	}
	for name := range top {
		target := filepath.Join(dataLink, name)
		if cur, err := os.Readlink(filepath.Join(dir, name)); err == nil && cur == target {
			continue
		}
		if err := swapSymlink(filepath.Join(dir, name), target); err != nil {
			return err
		}
	}
	// Names the new payload no longer has, and the old payload, go.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") || top[n] {
			continue
		}
		if cur, err := os.Readlink(filepath.Join(dir, n)); err == nil && strings.HasPrefix(cur, dataLink+"/") {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	if old != "" && old != filepath.Base(payload) && strings.HasPrefix(old, "..payload-") {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

func writePayloadFile(payload, rel string, f volumeFile, defaultMode *int32, group *int64) error {
	p := filepath.Join(payload, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create dir for %s: %w", f.path, err)
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode) & os.ModePerm
	}
	if f.mode != nil {
		mode = os.FileMode(*f.mode) & os.ModePerm
	}
	if err := os.WriteFile(p, f.data, mode); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", f.path, err)
	}
	if group != nil {
		if err := os.Chown(p, -1, int(*group)); err != nil {
			return fmt.Errorf("chown %s to fsGroup %d: %w", f.path, *group, err)
		}
	}
	return nil
}

// swapSymlink points link at target in one step: a new symlink renamed
// over the old name.
func swapSymlink(link, target string) error {
	tmp := filepath.Join(filepath.Dir(link), "..tmp_"+filepath.Base(link))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("switch symlink %s: %w", link, err)
	}
	return nil
}
