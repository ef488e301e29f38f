package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Volumes live under <pod dir>/volumes/<name>. They are written when the
// pod starts, atomically (see atomicwrite.go); projected volumes holding a
// ServiceAccount token are rewritten before the token expires (see
// tokens.go). Other later changes to Secrets and ConfigMaps are not
// followed.

func (w *podWorker) volumeDir(name string) string {
	return filepath.Join(w.dir, "volumes", name)
}

// setupVolumes materialises every pod volume. A failure is retried by the
// caller, as a kubelet retries a mount.
func (w *podWorker) setupVolumes(ctx context.Context, pod *corev1.Pod, src *objectSource) error {
	for _, v := range pod.Spec.Volumes {
		if err := w.setupVolume(ctx, pod, src, v); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

func (w *podWorker) setupVolume(ctx context.Context, pod *corev1.Pod, src *objectSource, v corev1.Volume) error {
	dir := w.volumeDir(v.Name)
	switch {
	case v.EmptyDir != nil:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("create emptyDir: %w", err)
		}
		// World-writable like a kubelet's emptyDir, so any runAsUser can
		// use it; the umask must not narrow it.
		return os.Chmod(dir, 0o777)
	case v.HostPath != nil:
		return nil
	case v.Secret != nil:
		files, err := w.secretFiles(ctx, src, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		if err != nil {
			return err
		}
		return writeVolume(dir, files, v.Secret.DefaultMode, fsGroup(pod))
	case v.ConfigMap != nil:
		files, err := w.configMapFiles(ctx, src, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		if err != nil {
			return err
		}
		return writeVolume(dir, files, v.ConfigMap.DefaultMode, fsGroup(pod))
	case v.DownwardAPI != nil:
		files, err := w.downwardFiles(pod, v.DownwardAPI.Items)
		if err != nil {
			return err
		}
		return writeVolume(dir, files, v.DownwardAPI.DefaultMode, fsGroup(pod))
	case v.Projected != nil:
		var files []volumeFile
		var due time.Time
		for _, s := range v.Projected.Sources {
			more, refresh, err := w.projectedFiles(ctx, pod, src, s)
			if err != nil {
				return err
			}
			files = append(files, more...)
			if !refresh.IsZero() && (due.IsZero() || refresh.Before(due)) {
				due = refresh
			}
		}
		if err := writeVolume(dir, files, v.Projected.DefaultMode, fsGroup(pod)); err != nil {
			return err
		}
		if !due.IsZero() {
			w.setTokenDue(v.Name, due)
		}
		return nil
	}
	return fmt.Errorf("volume type not supported by localnode (emptyDir, hostPath, secret, configMap, downwardAPI and projected are)")
}

// volumeSource is where a volume's content lives on the host.
func (w *podWorker) volumeSource(pod *corev1.Pod, name string) (string, error) {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			if v.HostPath != nil {
				return v.HostPath.Path, nil
			}
			return w.volumeDir(name), nil
		}
	}
	return "", fmt.Errorf("volumeMount names unknown volume %q", name)
}

// volumeFile is one file of a secret, configMap, downwardAPI or projected
// volume.
type volumeFile struct {
	path string
	data []byte
	mode *int32
}

func (w *podWorker) secretFiles(ctx context.Context, src *objectSource, name string, items []corev1.KeyToPath, optional *bool) ([]volumeFile, error) {
	s, err := src.secret(ctx, name, optional)
	if err != nil || s == nil {
		return nil, err
	}
	return keyFiles(s.Data, items, optional, "secret "+name)
}

func (w *podWorker) configMapFiles(ctx context.Context, src *objectSource, name string, items []corev1.KeyToPath, optional *bool) ([]volumeFile, error) {
	cm, err := src.configMap(ctx, name, optional)
	if err != nil || cm == nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return keyFiles(data, items, optional, "configmap "+name)
}

// keyFiles maps keys to files: every key by its name, or only the items.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, optional *bool, what string) ([]volumeFile, error) {
	var files []volumeFile
	if len(items) == 0 {
		for k, v := range data {
			files = append(files, volumeFile{path: k, data: v})
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files = append(files, volumeFile{path: it.Path, data: v, mode: it.Mode})
	}
	return files, nil
}

func (w *podWorker) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile) ([]volumeFile, error) {
	var files []volumeFile
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = fieldValue(pod, it.FieldRef.FieldPath, w.podIP())
		case it.ResourceFieldRef != nil:
			v, err = w.n.resourceValue(pod, &corev1.Container{}, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, volumeFile{path: it.Path, data: []byte(v), mode: it.Mode})
	}
	return files, nil
}

// projectedFiles returns a projected source's files and, for a
// ServiceAccount token, when to refresh it.
func (w *podWorker) projectedFiles(ctx context.Context, pod *corev1.Pod, src *objectSource, s corev1.VolumeProjection) ([]volumeFile, time.Time, error) {
	var files []volumeFile
	var err error
	switch {
	case s.Secret != nil:
		files, err = w.secretFiles(ctx, src, s.Secret.Name, s.Secret.Items, s.Secret.Optional)
	case s.ConfigMap != nil:
		files, err = w.configMapFiles(ctx, src, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional)
	case s.DownwardAPI != nil:
		files, err = w.downwardFiles(pod, s.DownwardAPI.Items)
	case s.ServiceAccountToken != nil:
		tok, refresh, err := w.serviceAccountToken(ctx, pod, s.ServiceAccountToken)
		if err != nil {
			return nil, time.Time{}, err
		}
		return []volumeFile{{path: s.ServiceAccountToken.Path, data: []byte(tok)}}, refresh, nil
	default:
		err = fmt.Errorf("projected source not supported by localnode")
	}
	return files, time.Time{}, err
}

// fsGroup is the pod's securityContext.fsGroup, or nil.
func fsGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// containerMounts turns a container's volumeMounts into bind mounts.
func (w *podWorker) containerMounts(pod *corev1.Pod, c *corev1.Container) ([]mountSpec, error) {
	var out []mountSpec
	for _, m := range c.VolumeMounts {
		srcDir, err := w.volumeSource(pod, m.Name)
		if err != nil {
			return nil, err
		}
		if m.SubPath != "" {
			sub := filepath.Clean(m.SubPath)
			if filepath.IsAbs(sub) || sub == ".." || strings.HasPrefix(sub, "../") {
				return nil, fmt.Errorf("subPath %q escapes volume %q", m.SubPath, m.Name)
			}
			srcDir = filepath.Join(srcDir, sub)
			if _, err := os.Stat(srcDir); os.IsNotExist(err) {
				if err := os.MkdirAll(srcDir, 0o777); err != nil {
					return nil, fmt.Errorf("create subPath %s: %w", m.SubPath, err)
				}
			}
		}
		out = append(out, mountSpec{Source: srcDir, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out, nil
}
