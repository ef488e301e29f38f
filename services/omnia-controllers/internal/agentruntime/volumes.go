package agentruntime

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// PackVolumeName is the pod volume holding a ConfigMap pack's pack.json.
// The name is the operator's: an agent volume may not take it.
const PackVolumeName = "promptpack"

// namedMount is a volume mount and the spec field it came from, so an
// error can name the field.
type namedMount struct {
	field string
	mount corev1.VolumeMount
}

// podVolumes returns the pod's volumes — the operator's own (the pack),
// then spec.runtime.volumes, then spec.podOverrides.extraVolumes — after
// checking them as the API server will check the pod: every volume
// decodes strictly, its name is an RFC 1123 label, no two volumes share a
// name, and every mount names a volume of the pod. Checking here names the
// spec field at fault in the DeploymentReady condition; left to the API
// server, the whole Deployment would be refused with a message about the
// Deployment's own fields.
func podVolumes(a *omniav1.AgentRuntime, own []corev1.Volume) ([]corev1.Volume, error) {
	runtimeVols, err := a.Spec.Runtime.DecodeVolumes()
	if err != nil {
		return nil, err
	}
	extraVols, err := a.Spec.PodOverrides.DecodeExtraVolumes()
	if err != nil {
		return nil, err
	}
	vols := append([]corev1.Volume(nil), own...)
	// owner maps each volume name of the pod to what declared it. The pack
	// volume's name is reserved even for a live pack, which has none, so
	// switching the pack to a ConfigMap cannot make a valid agent invalid.
	owner := map[string]string{}
	for _, v := range own {
		owner[v.Name] = "the operator's " + v.Name + " volume"
	}
	for _, group := range []struct {
		field string
		vols  []corev1.Volume
	}{{"runtime.volumes", runtimeVols}, {"podOverrides.extraVolumes", extraVols}} {
		for i, v := range group.vols {
			field := fmt.Sprintf("%s[%d]", group.field, i)
			if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
				return nil, fmt.Errorf("%s: name %q: %s", field, v.Name, strings.Join(errs, "; "))
			}
			if v.Name == PackVolumeName {
				return nil, fmt.Errorf("%s: name %q is reserved for the operator's PromptPack volume", field, v.Name)
			}
			if prev, dup := owner[v.Name]; dup {
				return nil, fmt.Errorf("%s: name %q is already used by %s", field, v.Name, prev)
			}
			owner[v.Name] = field
			vols = append(vols, v)
		}
	}
	for _, m := range agentMounts(a) {
		if _, ok := owner[m.mount.Name]; !ok {
			return nil, fmt.Errorf("%s: mounts volume %q, which the pod does not have", m.field, m.mount.Name)
		}
	}
	return vols, nil
}

// agentMounts are the agent's own mounts of the runtime container:
// spec.runtime.volumeMounts, then spec.podOverrides.extraVolumeMounts.
func agentMounts(a *omniav1.AgentRuntime) []namedMount {
	var out []namedMount
	if rt := a.Spec.Runtime; rt != nil {
		for i, m := range rt.VolumeMounts {
			out = append(out, namedMount{fmt.Sprintf("runtime.volumeMounts[%d]", i), m})
		}
	}
	if po := a.Spec.PodOverrides; po != nil {
		for i, m := range po.ExtraVolumeMounts {
			out = append(out, namedMount{fmt.Sprintf("podOverrides.extraVolumeMounts[%d]", i), m})
		}
	}
	return out
}
