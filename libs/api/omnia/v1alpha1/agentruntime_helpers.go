package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// DecodeVolumes decodes spec.runtime.volumes, which the CRD schema keeps as
// raw objects. Unknown fields and volumes without a name are errors, so a
// typo is reported instead of silently dropped.
func (r *RuntimeConfig) DecodeVolumes() ([]corev1.Volume, error) {
	if r == nil {
		return nil, nil
	}
	return decodeVolumes("runtime.volumes", r.Volumes)
}

// DecodeExtraVolumes decodes spec.podOverrides.extraVolumes, which the CRD
// schema keeps as raw objects, with the same strictness as DecodeVolumes.
func (p *PodOverrides) DecodeExtraVolumes() ([]corev1.Volume, error) {
	if p == nil {
		return nil, nil
	}
	return decodeVolumes("podOverrides.extraVolumes", p.ExtraVolumes)
}

func decodeVolumes(field string, raws []apiextensionsv1.JSON) ([]corev1.Volume, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	out := make([]corev1.Volume, 0, len(raws))
	for i, raw := range raws {
		var v corev1.Volume
		if err := decodeStrict(raw.Raw, &v); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		if v.Name == "" {
			return nil, fmt.Errorf("%s[%d]: name is required", field, i)
		}
		out = append(out, v)
	}
	return out, nil
}

func decodeStrict(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
