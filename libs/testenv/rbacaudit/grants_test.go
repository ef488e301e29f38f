package rbacaudit

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const manifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: ctl, namespace: sys}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ctl}
rules:
  - apiGroups: [""]
    resources: [pods, pods/log]
    verbs: [get, list]
  - nonResourceURLs: [/metrics]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ctl}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ctl}
subjects: [{kind: ServiceAccount, name: ctl, namespace: sys}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease, namespace: sys}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [ctl-lock]
    verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lease, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects: [{kind: ServiceAccount, name: ctl}]
`

func TestGrantsExpandEveryRuleForItsServiceAccount(t *testing.T) {
	objs, err := Decode([]byte(manifest + "\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 5 {
		t.Fatalf("decoded %d objects, want 5 (the empty document skipped)", len(objs))
	}
	got, err := Grants(objs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.String())
	}
	slices.Sort(names)
	want := []string{
		"sys/ctl: get pods cluster-wide",
		"sys/ctl: get pods/log cluster-wide",
		"sys/ctl: get url /metrics cluster-wide",
		"sys/ctl: list pods cluster-wide",
		"sys/ctl: list pods/log cluster-wide",
		"sys/ctl: update coordination.k8s.io/leases ctl-lock in sys",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("grants:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

func TestGrantsRefuseWhatTheInstallDoesNotShip(t *testing.T) {
	cases := []struct {
		rule, doc, wantErr string
	}{
		{"a binding to a role not shipped is an error", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: x}
roleRef: {kind: ClusterRole, name: absent}
subjects: [{kind: ServiceAccount, name: a, namespace: b}]`, "not among the objects"},
		{"a binding to a user is an error", manifest + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: people}
roleRef: {kind: ClusterRole, name: ctl}
subjects: [{kind: User, name: alice}]`, "only ServiceAccounts"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			objs, err := Decode([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Grants(objs); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseRequestNamesTheVerbAsRBACDoes(t *testing.T) {
	cases := []struct {
		rule, method, url string
		want              Request
		resource          bool
	}{
		{"a namespaced get", "GET", "/api/v1/namespaces/ns/pods/p", Request{Verb: "get", Resource: "pods", Namespace: "ns", Name: "p"}, true},
		{"a list across namespaces", "GET", "/apis/batch/v1/jobs", Request{Verb: "list", Group: "batch", Resource: "jobs"}, true},
		{"a watch is a GET with watch=true", "GET", "/apis/batch/v1/namespaces/ns/jobs?watch=true", Request{Verb: "watch", Group: "batch", Resource: "jobs", Namespace: "ns"}, true},
		{"a subresource joins its resource", "PUT", "/apis/x.io/v1/namespaces/ns/agents/a/status", Request{Verb: "update", Group: "x.io", Resource: "agents/status", Namespace: "ns", Name: "a"}, true},
		{"a POST creates", "POST", "/api/v1/namespaces/ns/secrets", Request{Verb: "create", Resource: "secrets", Namespace: "ns"}, true},
		{"a PATCH patches", "PATCH", "/api/v1/namespaces/ns/pods/p", Request{Verb: "patch", Resource: "pods", Namespace: "ns", Name: "p"}, true},
		{"a DELETE of a name deletes", "DELETE", "/api/v1/namespaces/ns/pods/p", Request{Verb: "delete", Resource: "pods", Namespace: "ns", Name: "p"}, true},
		{"a DELETE of a collection", "DELETE", "/api/v1/namespaces/ns/pods", Request{Verb: "deletecollection", Resource: "pods", Namespace: "ns"}, true},
		{"discovery is not a resource request", "GET", "/apis", Request{}, false},
		{"a cluster-scoped object", "GET", "/api/v1/namespaces/ns", Request{Verb: "get", Resource: "namespaces", Name: "ns"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, ok := ParseRequest(httptest.NewRequest(tc.method, tc.url, nil))
			if ok != tc.resource || (ok && got != tc.want) {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.resource)
			}
			if ok {
				g := Grant{Namespace: tc.want.Namespace, Group: tc.want.Group, Resource: tc.want.Resource, Verb: tc.want.Verb}
				if !g.Allows(got) {
					t.Fatalf("%v does not allow %+v", g, got)
				}
			}
		})
	}
}
