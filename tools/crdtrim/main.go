// Command crdtrim drops the field descriptions below given schema paths of
// a CRD written by controller-gen, keeping the description of each path
// itself, and caps the length of given lists.
//
//	crdtrim FILE PATH... [PATH=N]...
//
// PATH is a dotted property path from a version's openAPIV3Schema, such as
// spec.template; a name ending in [] steps into the list's items
// (spec.template.spec.containers[].ports). It exists for embedded
// Kubernetes types: the Station's pod template carries the full
// PodTemplateSpec schema so admission checks it, but that schema's
// upstream descriptions alone would push the CRD past what `kubectl apply`
// can store in its last-applied annotation (256 KiB). Those fields are
// documented by Kubernetes (kubectl explain pod.spec).
//
// PATH=N sets maxItems N on the list at PATH. Kubernetes' own lists are
// unbounded, and admission prices a CEL rule over an unbounded list at the
// largest list a request could hold, past its cost budget; a bound on the
// lists the Station's rules walk is what lets those rules exist.
//
// The file is written back as controller-gen writes it (its header, then
// the object through sigs.k8s.io/yaml with sorted keys), so running
// controller-gen and then crdtrim is reproducible.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: crdtrim FILE PATH... [PATH=N]...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdtrim:", err)
		os.Exit(1)
	}
}

func run(file string, paths []string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := trim(raw, paths)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, out, 0o644)
}

// docSeparator starts the one document controller-gen writes after its
// (possibly empty) header.
const docSeparator = "---\n"

// trim returns raw with the descriptions below each path removed, and
// each PATH=N list capped at N items, in every version of the CRD.
func trim(raw []byte, args []string) ([]byte, error) {
	var paths []string
	caps := map[string]int64{}
	for _, a := range args {
		p, n, ok := strings.Cut(a, "=")
		if !ok {
			paths = append(paths, a)
			continue
		}
		max, err := strconv.ParseInt(n, 10, 64)
		if err != nil || max < 0 {
			return nil, fmt.Errorf("%s: the cap is not a number of items", a)
		}
		caps[p] = max
	}
	header, body, ok := bytes.Cut(raw, []byte(docSeparator))
	if !ok {
		return nil, errors.New("no YAML document (---) found")
	}
	j, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, err
	}
	var crd map[string]any
	// UseNumber keeps integers exact, as controller-gen does.
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&crd); err != nil {
		return nil, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) == 0 {
		return nil, errors.New("not a CRD: no spec.versions")
	}
	for _, v := range versions {
		schema := lookup(v, "schema", "openAPIV3Schema")
		if schema == nil {
			return nil, errors.New("a version has no schema.openAPIV3Schema")
		}
		for _, p := range paths {
			node := resolve(schema, p)
			if node == nil {
				return nil, fmt.Errorf("no property %s in the schema", p)
			}
			for _, child := range children(node) {
				dropDescriptions(child)
			}
		}
		for p, max := range caps {
			node := resolve(schema, p)
			if node == nil {
				return nil, fmt.Errorf("no property %s in the schema", p)
			}
			if node["type"] != "array" {
				return nil, fmt.Errorf("%s is not a list", p)
			}
			node["maxItems"] = max
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append(append(header, docSeparator...), out...), nil
}

// resolve follows a dotted property path from schema, stepping into a
// list's items after a name ending in []; nil when a step is missing.
func resolve(schema map[string]any, path string) map[string]any {
	node := schema
	for _, step := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(step, "[]")
		node = lookup(node, "properties", name)
		if items {
			node = lookup(node, "items")
		}
	}
	return node
}

// lookup follows keys through nested objects; nil when one is missing.
func lookup(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// children returns the schemas nested in a schema: its properties, items,
// additionalProperties and the alternatives of allOf, anyOf and oneOf.
func children(s map[string]any) []map[string]any {
	var out []map[string]any
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if m, ok := s[k].(map[string]any); ok {
			out = append(out, m)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if list, ok := s[k].([]any); ok {
			for _, e := range list {
				if m, ok := e.(map[string]any); ok {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

func dropDescriptions(s map[string]any) {
	delete(s, "description")
	for _, c := range children(s) {
		dropDescriptions(c)
	}
}
