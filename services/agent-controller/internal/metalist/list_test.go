package metalist

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAMetadataPageThatIsNotOneIsAnError: whatever answers a metadata
// LIST with a 200, only a PartialObjectMetadataList is read as
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
		{"a list without its resourceVersion is an error", `{"kind":"PartialObjectMetadataList","items":[]}`, "no resourceVersion"},
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
			req := Request{Client: kube.CoreV1().RESTClient(), Path: CollectionPath("batch", "v1", "", "jobs"), Resource: "jobs"}
			var got []string
			_, err = List(context.Background(), req, func(m *Item, listRV string) {
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

// FuzzDecodePage: no answer of a server makes the page decoder panic, and
// what it accepts is a metadata list.
func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(`{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"7","continue":"c"},"items":[{"metadata":{"namespace":"ns","name":"a","resourceVersion":"5"}}]}`))
	f.Add([]byte(`{"kind":"Status","status":"Failure"}`))
	f.Add([]byte(`{"items":null}`))
	f.Add(protobufPage(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePage(b)
		if err == nil && p.Kind != "PartialObjectMetadataList" {
			t.Errorf("accepted a page of kind %q", p.Kind)
		}
	})
}

// protobufPage is a metadata LIST page as the API server encodes it in
// protobuf: two Jobs with all the metadata a Job carries.
func protobufPage(tb testing.TB) []byte {
	tb.Helper()
	sch := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(sch); err != nil {
		tb.Fatal(err)
	}
	item := func(name, rv string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", ResourceVersion: rv, UID: types.UID("u-" + name), Generation: 3,
			CreationTimestamp: metav1.Now(),
			Labels:            map[string]string{"batch.kubernetes.io/job-name": name},
			Annotations:       map[string]string{"a": strings.Repeat("x", 300)},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "agents.re-cinq.com/v1alpha1", Kind: "Agent", Name: "a", UID: "u"}},
			Finalizers:        []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:active":{}}}`)}},
		}}
	}
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: ptrTo(int64(7))},
		Items:    []metav1.PartialObjectMetadata{item("agent-job-a", "40"), item("agent-job-b", "41")},
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(sch, sch).Encode(list, &buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func ptrTo[T any](v T) *T { return &v }

// TestTheProtobufPageReadsWhatTheJSONPageReads: a page in protobuf reads
// as the same page in JSON would, its other fields skipped, and one cut
// short anywhere is an error.
func TestTheProtobufPageReadsWhatTheJSONPageReads(t *testing.T) {
	b := protobufPage(t)
	got, err := decodePage(b)
	if err != nil {
		t.Fatal(err)
	}
	want := page{Kind: "PartialObjectMetadataList", Items: []listedItem{
		{Item{Namespace: "ns", Name: "agent-job-a", ResourceVersion: "40"}},
		{Item{Namespace: "ns", Name: "agent-job-b", ResourceVersion: "41"}}}}
	want.Metadata.ResourceVersion, want.Metadata.Continue = "42", "next"
	if fmt.Sprint(*got) != fmt.Sprint(want) {
		t.Errorf("read %+v, want %+v", *got, want)
	}
	for cut := len(protobufPrefix) + 1; cut < len(b); cut += 7 {
		if _, err := decodePage(b[:cut]); err == nil {
			t.Errorf("a page cut at %d of %d bytes was read", cut, len(b))
		}
	}
}
