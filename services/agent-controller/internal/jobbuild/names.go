package jobbuild

import (
	"fmt"
	"hash/fnv"
	"strings"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// MaxNameLength is the longest name given to a Job or used as a label
// value: Kubernetes caps label values at 63 characters, and the Job
// controller copies the Job name into a pod label.
const MaxNameLength = 63

// SafeName bounds s to MaxNameLength. A longer name keeps a prefix and ends
// in "-" plus 8 hex digits of its FNV-1a hash, so two long names that share
// a prefix still differ, and the same input always gives the same output —
// which is what lets the controller re-derive a Job's name after a crash.
func SafeName(s string) string {
	if len(s) <= MaxNameLength {
		return s
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	suffix := fmt.Sprintf("%016x", h.Sum64())[:8]
	prefix := strings.TrimRight(s[:MaxNameLength-len(suffix)-1], ".-")
	return prefix + "-" + suffix
}

// JobName is the name of the Job that runs agent.
func JobName(agentName string) string {
	return SafeName(agentsv1alpha1.JobNamePrefix + agentName)
}
