// Package rbacaudit checks shipped RBAC against what a service really does:
// it expands RBAC manifests into the single permissions each ServiceAccount
// gets, installs them in a test control plane, and records every request a
// process makes as a ServiceAccount. A test then shows the RBAC is enough
// (nothing refused) and no more (every grant used).
package rbacaudit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Grant is one verb RBAC allows one ServiceAccount: on Resource (with its
// "/subresource") of Group, in Namespace ("" for every namespace), on the
// object called Name ("" for any); or, for a non-resource rule, on URL.
type Grant struct {
	// ServiceAccount is "namespace/name".
	ServiceAccount string
	Namespace      string
	Group          string
	Resource       string
	Name           string
	URL            string
	Verb           string
}

// String names the grant the way a reviewer reads it.
func (g Grant) String() string {
	scope := "cluster-wide"
	if g.Namespace != "" {
		scope = "in " + g.Namespace
	}
	if g.URL != "" {
		return fmt.Sprintf("%s: %s url %s %s", g.ServiceAccount, g.Verb, g.URL, scope)
	}
	res := g.Resource
	if g.Group != "" {
		res = g.Group + "/" + res
	}
	if g.Name != "" {
		res += " " + g.Name
	}
	return fmt.Sprintf("%s: %s %s %s", g.ServiceAccount, g.Verb, res, scope)
}

// Allows reports whether the grant covers the request.
func (g Grant) Allows(r Request) bool {
	return g.URL == "" && g.Verb == r.Verb && g.Group == r.Group && g.Resource == r.Resource &&
		(g.Namespace == "" || g.Namespace == r.Namespace) && (g.Name == "" || g.Name == r.Name)
}

// Decode splits a multi-document YAML manifest into objects, skipping
// empty documents.
func Decode(raw []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Grants expands the bindings among objs into every single permission they
// give a ServiceAccount. A binding whose role is not among objs, or whose
// subject is not a ServiceAccount, is an error: the install would then
// depend on something it does not ship, or grant people rather than
// workloads. Role and binding names do not appear in the result, so two
// installs that grant the same things compare equal.
func Grants(objs []*unstructured.Unstructured) ([]Grant, error) {
	roles := map[string]*unstructured.Unstructured{} // "Kind ns/name"
	for _, o := range objs {
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			roles[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
	var out []Grant
	var errs []error
	for _, b := range objs {
		if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		refKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		refName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		scope, roleNS := "", ""
		if b.GetKind() == "RoleBinding" {
			scope = b.GetNamespace()
			if refKind == "Role" {
				roleNS = scope
			}
		}
		role, ok := roles[refKind+" "+roleNS+"/"+refName]
		if !ok {
			errs = append(errs, fmt.Errorf("%s %s/%s binds %s %s, which is not among the objects", b.GetKind(), b.GetNamespace(), b.GetName(), refKind, refName))
			continue
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, s := range subjects {
			sub, _ := s.(map[string]any)
			if sub["kind"] != "ServiceAccount" {
				errs = append(errs, fmt.Errorf("%s %s binds a %v; only ServiceAccounts are expected", b.GetKind(), b.GetName(), sub["kind"]))
				continue
			}
			ns, _ := sub["namespace"].(string)
			if ns == "" {
				ns = b.GetNamespace() // the RBAC authorizer's default for a RoleBinding
			}
			name, _ := sub["name"].(string)
			out = append(out, expand(ns+"/"+name, scope, rules)...)
		}
	}
	return out, errors.Join(errs...)
}

// expand lists every permission the rules give sa within scope.
func expand(sa, scope string, rules []any) []Grant {
	var out []Grant
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		names := strs(rule["resourceNames"])
		if len(names) == 0 {
			names = []string{""}
		}
		for _, v := range strs(rule["verbs"]) {
			for _, g := range strs(rule["apiGroups"]) {
				for _, res := range strs(rule["resources"]) {
					for _, n := range names {
						out = append(out, Grant{ServiceAccount: sa, Namespace: scope, Group: g, Resource: res, Name: n, Verb: v})
					}
				}
			}
			for _, u := range strs(rule["nonResourceURLs"]) {
				out = append(out, Grant{ServiceAccount: sa, Namespace: scope, URL: u, Verb: v})
			}
		}
	}
	return out
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
