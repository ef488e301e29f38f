package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAMetadataPageThatIsNotOneIsAnError: whatever answers the poll's
// metadata LIST with a 200, only a PartialObjectMetadataList is read as
// one; anything else is an error, never a list of nothing (which would
// evict every cached object).
func TestAMetadataPageThatIsNotOneIsAnError(t *testing.T) {
	cases := []struct {
		name, body string
		wantErr    string
	}{
		{"a metadata list is read", `{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"namespace":"ns","name":"a","resourceVersion":"5","managedFields":[{"manager":"x"}]}}]}`, ""},
		{"a full list the server sent instead is an error", `{"kind":"JobList","metadata":{"resourceVersion":"7"},"items":[]}`, `came back as "JobList"`},
		{"an empty object is an error", `{}`, `came back as ""`},
		{"a page cut short is an error", `{"kind":"PartialObjectMetadataList","items":[{"metadata":`, "read a page"},
		{"a body that is not JSON is an error", `<html>proxy</html>`, "read a page"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") {
					t.Errorf("Accept %q asks for no metadata list", r.Header.Get("Accept"))
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			lw := &listWatch{gvk: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, resource: "jobs",
				versions: kube.CoreV1().RESTClient()}
			var got []string
			_, err = lw.listVersions(context.Background(), func(m *itemVersion, listRV string) {
				got = append(got, m.Namespace+"/"+m.Name+"@"+m.ResourceVersion+"<"+listRV)
			})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr == "" && (len(got) != 1 || got[0] != "ns/a@5<7"):
				t.Errorf("listed %v, want [ns/a@5<7]", got)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err %v, want one saying %s", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeVersionsPage: no answer of a server makes the page decoder
// panic, and what it accepts is a metadata list.
func FuzzDecodeVersionsPage(f *testing.F) {
	f.Add([]byte(`{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"7","continue":"c"},"items":[{"metadata":{"namespace":"ns","name":"a","resourceVersion":"5"}}]}`))
	f.Add([]byte(`{"kind":"Status","status":"Failure"}`))
	f.Add([]byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		page, err := decodeVersionsPage(b)
		if err == nil && page.Kind != "PartialObjectMetadataList" {
			t.Errorf("accepted a page of kind %q", page.Kind)
		}
	})
}
