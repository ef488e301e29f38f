package rbacaudit

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install creates objs until the test ends, putting the namespaced RBAC
// kinds in namespace as a kustomize install does. Cluster-scoped objects
// are deleted at the end; the namespaced ones go with their namespace.
func Install(t testing.TB, c client.Client, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		obj = obj.DeepCopy()
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			obj.SetNamespace(namespace)
		}
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetNamespace() == "" {
			t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
		}
	}
}

// Request is one request a process made, as RBAC names it, and the status
// it got (0 when no answer came).
type Request struct {
	Verb, Group, Resource, Namespace, Name string
	Code                                   int
}

// Recorder passes requests on and records each resource request.
type Recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []Request
}

// RoundTrip forwards req and records it.
func (a *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if r, ok := ParseRequest(req); ok {
		if err == nil {
			r.Code = resp.StatusCode
		}
		a.mu.Lock()
		a.reqs = append(a.reqs, r)
		a.mu.Unlock()
	}
	return resp, err
}

// Requests returns what was recorded so far.
func (a *Recorder) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

// ParseRequest names req as the RBAC authorizer does; discovery and the
// other non-resource URLs are not resource requests.
func ParseRequest(req *http.Request) (Request, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var r Request
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.Group, parts = parts[1], parts[3:]
	default:
		return r, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.Namespace, parts = parts[1], parts[2:]
	}
	r.Resource = parts[0]
	if len(parts) > 1 {
		r.Name = parts[1]
	}
	if len(parts) > 2 {
		r.Resource += "/" + parts[2]
	}
	switch w := req.URL.Query().Get("watch"); {
	case req.Method == http.MethodGet && (w == "true" || w == "1"):
		r.Verb = "watch"
	case req.Method == http.MethodGet && r.Name != "":
		r.Verb = "get"
	case req.Method == http.MethodGet:
		r.Verb = "list"
	case req.Method == http.MethodPost:
		r.Verb = "create"
	case req.Method == http.MethodPut:
		r.Verb = "update"
	case req.Method == http.MethodPatch:
		r.Verb = "patch"
	case req.Method == http.MethodDelete && r.Name != "":
		r.Verb = "delete"
	case req.Method == http.MethodDelete:
		r.Verb = "deletecollection"
	}
	return r, true
}

// AsServiceAccount returns cfg impersonating the ServiceAccount
// namespace/name with the groups the API server gives it.
func AsServiceAccount(cfg *rest.Config, namespace, name string) *rest.Config {
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return as
}

// RecordedKubeconfig writes a kubeconfig that reaches the API server of cfg
// as the ServiceAccount namespace/name, through a proxy that records every
// request, and returns its path and the recorder. A binary under test then
// runs exactly as it would in the cluster, flags and all.
func RecordedKubeconfig(t testing.TB, cfg *rest.Config, namespace, name string) (string, *Recorder) {
	t.Helper()
	asSA := AsServiceAccount(cfg, namespace, name)
	rt, err := rest.TransportFor(asSA)
	if err != nil {
		t.Fatal(err)
	}
	target, _, err := rest.DefaultServerUrlFor(asSA)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{next: rt}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rec,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["recorded"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "recorded", AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path, rec
}
