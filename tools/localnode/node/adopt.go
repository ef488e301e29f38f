package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// sweepOrphans removes what an earlier run left for pods that no longer
// exist: their processes are killed and their state removed. Pods that
// still exist are adopted by their workers.
func (n *Node) sweepOrphans() {
	pods, err := n.bound.List(labels.Everything())
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, p := range pods {
		live[string(p.UID)] = true
	}
	entries, err := os.ReadDir(podsRoot(n.cfg.StateDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if live[e.Name()] {
			continue
		}
		n.log.Info("cleaning up state of a pod that no longer exists", "uid", e.Name())
		n.removePodDir(types.UID(e.Name()))
	}
	logDirs, err := os.ReadDir(logsRoot(n.cfg.StateDir))
	if err != nil {
		return
	}
	for _, e := range logDirs {
		i := strings.LastIndexByte(e.Name(), '_')
		if i >= 0 && !live[e.Name()[i+1:]] {
			_ = os.RemoveAll(filepath.Join(logsRoot(n.cfg.StateDir), e.Name()))
		}
	}
}

// killPodProcesses SIGKILLs the process groups recorded under a pod dir
// that still run, and waits briefly for them to go.
func killPodProcesses(podDir string) {
	pidFiles, _ := filepath.Glob(filepath.Join(podDir, "containers", "*", "*", pidFile))
	for _, pf := range pidFiles {
		raw, err := os.ReadFile(pf)
		if err != nil {
			continue
		}
		var pid int
		var start int64
		if _, err := fmt.Sscanf(string(raw), "%d %d", &pid, &start); err != nil || !alive(pid, start) {
			continue
		}
		signalPod(filepath.Dir(pf), pid, syscall.SIGKILL)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		for i := 0; i < 50 && alive(pid, start); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// removePodState deletes a pod's directory and logs once it is gone from
// the API.
func (n *Node) removePodState(uid types.UID, ns, name string) {
	n.removePodDir(uid)
	_ = os.RemoveAll(podLogDir(n.cfg.StateDir, ns, name, uid))
}

// removePodDir kills what still runs of a pod, deletes its network
// namespace and unmounts its container roots before removing its
// directory, so the removal never reaches through a mount.
func (n *Node) removePodDir(uid types.UID) {
	dir := filepath.Join(podsRoot(n.cfg.StateDir), string(uid))
	killPodProcesses(dir)
	if n.net != nil {
		n.net.teardownPod(uid, dir)
	}
	unmountUnder(dir)
	_ = os.RemoveAll(dir)
}
