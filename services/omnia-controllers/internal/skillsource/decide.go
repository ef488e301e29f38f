// Package skillsource is the SkillSource controller: it parses the skill
// documents of the ConfigMap a SkillSource names and publishes the skills
// found (name, description, allowed tools, key) in its status, where the
// PromptPack controller resolves spec.skills against them. The decision is
// the pure function Decide; Reconciler only gathers the snapshot and
// writes the result.
package skillsource

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Source is the SkillSource being reconciled.
	Source *omniav1.SkillSource
	// ConfigMap is the ConfigMap named by spec.configMapRef, nil when it
	// does not exist.
	ConfigMap *corev1.ConfigMap
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes and returns; it emits no events.
// Retry is set when the referenced ConfigMap does not exist; bad content
// waits for the ConfigMap watch instead, since a retry would read the
// same content.
type Decision = kubeutil.Outcome[omniav1.SkillSourceStatus]

// Decide computes a SkillSource's status from a snapshot.
func Decide(s Snapshot) Decision {
	src := s.Source
	st := *src.Status.DeepCopy()
	st.ObservedGeneration = src.Generation
	var d Decision
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		kubeutil.SetCondition(&st.Conditions, src.Generation, s.Now, omniav1.ConditionReady, status, reason, truncate.String(msg, 32<<10))
	}
	fail := func(reason, msg string) {
		st.Phase = omniav1.SkillSourcePhaseError
		// Stale skills would let a PromptPack resolve content that is gone.
		st.Skills = nil
		st.ContentChecksum = ""
		ready(metav1.ConditionFalse, reason, msg)
	}

	name := src.Spec.ConfigMapRef.Name
	if s.ConfigMap == nil {
		msg := fmt.Sprintf("ConfigMap %q not found in namespace %q", name, src.Namespace)
		fail(omniav1.ReasonSkillConfigMapNotFound, msg)
		d.Retry = fmt.Errorf("sync SkillSource %s/%s: %s", src.Namespace, src.Name, msg)
	} else if c, err := ParseContent(s.ConfigMap.Data); err != nil {
		reason := omniav1.ReasonInvalidSkillDocument
		var ce *ContentError
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		fail(reason, fmt.Sprintf("ConfigMap %q: %v", name, err))
	} else {
		st.Phase = omniav1.SkillSourcePhaseReady
		st.Skills = c.Skills
		st.ContentChecksum = c.Checksum
		ready(metav1.ConditionTrue, omniav1.ReasonSkillsSynced, fmt.Sprintf("%d skill(s) from ConfigMap %q", len(c.Skills), name))
	}
	d.Status = st
	d.Changed = !equality.Semantic.DeepEqual(src.Status, st)
	return d
}
