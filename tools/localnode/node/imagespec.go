package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
)

// imageArgv applies Kubernetes' rules for a container's command and args
// over its image's Entrypoint and Cmd: a command replaces the Entrypoint
// and drops the Cmd; args alone replace the Cmd; neither runs
// Entrypoint+Cmd. Only the container's own strings are $(VAR)-expanded.
func imageArgv(c *corev1.Container, cfg v1.Config, vals map[string]string) []string {
	exp := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, a := range in {
			out = append(out, expand(a, vals))
		}
		return out
	}
	switch {
	case len(c.Command) > 0:
		return append(exp(c.Command), exp(c.Args)...)
	case len(c.Args) > 0:
		return append(slices.Clone(cfg.Entrypoint), exp(c.Args)...)
	}
	return append(slices.Clone(cfg.Entrypoint), cfg.Cmd...)
}

// imageIdentity is who a container's process runs as in image mode.
type imageIdentity struct {
	uid, gid uint32
	groups   []uint32
	home     string
}

// passwdEntry is one line of an image's /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

// resolveIdentity picks the process identity as a kubelet and container
// runtime do: runAsUser and runAsGroup (container over pod) win, else the
// image's User ("uid", "uid:gid", "name" or "name:group", names looked up
// in the image's /etc/passwd and /etc/group). Without a group the user's
// primary group from /etc/passwd applies, else 0. Supplementary groups are
// the pod's fsGroup and supplementalGroups plus the user's memberships in
// the image's /etc/group. runAsNonRoot refuses a uid of 0.
func resolveIdentity(pod *corev1.Pod, c *corev1.Container, cfg v1.Config, rootfs string) (imageIdentity, error) {
	users := readPasswd(rootfs)
	groups := readGroups(rootfs)
	var id imageIdentity
	runUID, runGID := runAs(pod, c)
	userPart, groupPart, hasGroup := strings.Cut(cfg.User, ":")
	var name string
	switch {
	case runUID != nil:
		id.uid = uint32(*runUID)
		hasGroup = false
	case userPart == "":
	default:
		if v, err := strconv.ParseUint(userPart, 10, 32); err == nil {
			id.uid = uint32(v)
			break
		}
		found := false
		for _, u := range users {
			if u.name == userPart {
				id.uid, found = u.uid, true
				break
			}
		}
		if !found {
			return id, fmt.Errorf("image user %q is not in the image's /etc/passwd", userPart)
		}
	}
	id.home = "/"
	gidSet := false
	for _, u := range users {
		if u.uid == id.uid {
			name, id.home, id.gid, gidSet = u.name, u.home, u.gid, true
			break
		}
	}
	switch {
	case runGID != nil:
		id.gid = uint32(*runGID)
	case hasGroup:
		if v, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			id.gid = uint32(v)
			break
		}
		g, ok := groups[groupPart]
		if !ok {
			return id, fmt.Errorf("image group %q is not in the image's /etc/group", groupPart)
		}
		id.gid = g.gid
	case !gidSet:
		id.gid = 0
	}
	if nonRoot(pod, c) && id.uid == 0 {
		return id, fmt.Errorf("container has runAsNonRoot and image will run as root")
	}
	id.groups = []uint32{}
	add := func(g uint32) {
		if !slices.Contains(id.groups, g) {
			id.groups = append(id.groups, g)
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.FSGroup != nil {
			add(uint32(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			add(uint32(g))
		}
	}
	if name != "" {
		for _, g := range groups {
			if slices.Contains(g.members, name) {
				add(g.gid)
			}
		}
	}
	slices.Sort(id.groups)
	return id, nil
}

// nonRoot reports runAsNonRoot, the container's over the pod's.
func nonRoot(pod *corev1.Pod, c *corev1.Container) bool {
	v := false
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		v = *sc.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		v = *sc.RunAsNonRoot
	}
	return v
}

// readImageFile reads a file of an image rootfs without following a
// symlink out of it.
func readImageFile(rootfs, name string) []byte {
	r, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil
	}
	defer func() { _ = r.Close() }()
	raw, err := r.ReadFile(name)
	if err != nil {
		return nil
	}
	return raw
}

func readPasswd(rootfs string) []passwdEntry {
	var out []passwdEntry
	s := bufio.NewScanner(bytes.NewReader(readImageFile(rootfs, "etc/passwd")))
	for s.Scan() {
		f := strings.Split(s.Text(), ":")
		if len(f) < 6 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]})
	}
	return out
}

// groupEntry is one line of an image's /etc/group.
type groupEntry struct {
	gid     uint32
	members []string
}

func readGroups(rootfs string) map[string]groupEntry {
	out := map[string]groupEntry{}
	s := bufio.NewScanner(bytes.NewReader(readImageFile(rootfs, "etc/group")))
	for s.Scan() {
		f := strings.Split(s.Text(), ":")
		if len(f) < 4 {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		var members []string
		if f[3] != "" {
			members = strings.Split(f[3], ",")
		}
		out[f[0]] = groupEntry{gid: uint32(gid), members: members}
	}
	return out
}

// imageEnvDefaults are the variables a container gets unless its image or
// spec sets them: PATH and HOME (from the image's /etc/passwd).
func imageEnvDefaults(cfg v1.Config, home string) []string {
	var out []string
	has := func(k string) bool {
		for _, kv := range cfg.Env {
			if strings.HasPrefix(kv, k+"=") {
				return true
			}
		}
		return false
	}
	if !has("PATH") {
		out = append(out, "PATH="+defaultPath)
	}
	if !has("HOME") {
		out = append(out, "HOME="+home)
	}
	return out
}

// mergeEnv puts later variables over earlier ones, each kept at the
// position it first appeared: the image's env, then the container's.
func mergeEnv(lists ...[]string) []string {
	idx := map[string]int{}
	var out []string
	for _, l := range lists {
		for _, kv := range l {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}
