package main

import (
	"strings"
	"testing"
)

// crd is a controller-gen style CRD: a header, then one document with
// sorted keys.
const crd = `# generated
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
  - name: v1alpha1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            description: spec is ours.
            properties:
              other:
                description: other is ours.
                type: string
              template:
                description: template is ours.
                properties:
                  containers:
                    description: containers is Kubernetes'.
                    items:
                      description: A single container.
                      properties:
                        limits:
                          additionalProperties:
                            anyOf:
                            - description: an integer
                              type: integer
                            - type: string
                          description: limits is Kubernetes'.
                          type: object
                      type: object
                    type: array
                type: object
            type: object
        type: object
`

func TestTrim(t *testing.T) {
	for _, c := range []struct {
		name    string
		paths   []string
		want    []string
		notWant []string
		err     string
	}{
		{
			name:    "descriptions below the path are dropped, at any depth",
			paths:   []string{"spec.template"},
			notWant: []string{"containers is Kubernetes'", "A single container", "limits is Kubernetes'", "an integer"},
		},
		{
			name:  "the path keeps its own description and the rest of the schema keeps theirs",
			paths: []string{"spec.template"},
			want:  []string{"description: template is ours.", "description: other is ours.", "description: spec is ours."},
		},
		{
			name:  "the header and document separator are kept",
			paths: []string{"spec.template"},
			want:  []string{"# generated\n---\napiVersion: apiextensions.k8s.io/v1\n"},
		},
		{
			name:  "PATH=N caps the list at PATH",
			paths: []string{"spec.template", "spec.template.containers=64"},
			want:  []string{"maxItems: 64\n"},
		},
		{
			name:  "a name ending in [] steps into the list's items",
			paths: []string{"spec.template.containers[].limits=3"},
			err:   "spec.template.containers[].limits is not a list",
		},
		{
			name:  "a cap on a path the schema does not have is an error",
			paths: []string{"spec.template.missing=3"},
			err:   "no property spec.template.missing",
		},
		{
			name:  "a cap that is not a number is an error",
			paths: []string{"spec.template.containers=many"},
			err:   "not a number of items",
		},
		{
			name:  "a path the schema does not have is an error",
			paths: []string{"spec.missing"},
			err:   "no property spec.missing",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := trim([]byte(crd), c.paths)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(string(out), w) {
					t.Errorf("output still has %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestTrimWritesAsControllerGenDoes: a path with nothing to drop below it
// leaves the file byte for byte as it was, so the generator's output and
// crdtrim's never fight over formatting.
func TestTrimWritesAsControllerGenDoes(t *testing.T) {
	out, err := trim([]byte(crd), []string{"spec.other"})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != crd {
		t.Errorf("the file changed:\n%s", out)
	}
}
