package observability

// The sources TestNoSecretValueLeaksAnywhere searches: each returns every
// item it read, so that the test can show it searched something.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/agentplane/agentplane/tests/internal/runs"
)

// item is one searched thing: where it came from and its bytes.
type item struct {
	where string
	data  []byte
}

func readFiles(t *testing.T, paths []string) []item {
	var out []item
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			continue
		}
		out = append(out, item{where: p, data: b})
	}
	return out
}

func componentLogs(t *testing.T) []item {
	var paths []string
	for _, p := range logs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return readFiles(t, paths)
}

// podLogs reads every container log localnode keeps (work/node/logs, one
// file per container instance): the run pods' stdout and stderr.
func podLogs(t *testing.T) []item {
	var paths []string
	err := filepath.WalkDir(filepath.Join(suite.Work, "node", "logs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Errorf("pod logs: %v", err)
	}
	return readFiles(t, paths)
}

// statuses lists every object of every resource of group, in all
// namespaces, and returns each one's status.
func statuses(t *testing.T, group string) []item {
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(suite.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(suite.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var out []item
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || gv.Group != group {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", r.Name, err)
				continue
			}
			for _, o := range objs.Items {
				b, err := json.Marshal(o.Object["status"])
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, item{where: fmt.Sprintf("%s %s/%s status", r.Kind, o.GetNamespace(), o.GetName()), data: b})
			}
		}
	}
	return out
}

// workloads returns every pod, Job and ConfigMap whole: a secret's value
// may be referenced from a pod spec (secretKeyRef) but never written in it.
func workloads(t *testing.T) []item {
	ctx := context.Background()
	var out []item
	add := func(kind string, list any, err error) {
		if err != nil {
			t.Errorf("list %s: %v", kind, err)
			return
		}
		b, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Items []json.RawMessage }
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, raw := range l.Items {
			var m struct{ Metadata metav1.ObjectMeta }
			_ = json.Unmarshal(raw, &m)
			out = append(out, item{where: fmt.Sprintf("%s %s/%s", kind, m.Metadata.Namespace, m.Metadata.Name), data: raw})
		}
	}
	pods, err := suite.Env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	add("Pod", pods, err)
	jobs, err := suite.Env.Kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	add("Job", jobs, err)
	cms, err := suite.Env.Kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	add("ConfigMap", cms, err)
	return out
}

// settle waits (at most 20s) until the Events of ns stopped growing for
// two seconds, so that the ones the runs' ends caused are there.
func settle(t *testing.T, ns string) {
	ctx := context.Background()
	last, since, deadline := -1, time.Now(), time.Now().Add(20*time.Second)
	for time.Since(since) < 2*time.Second && time.Now().Before(deadline) {
		evs, err := suite.Env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) != last {
			last, since = len(evs.Items), time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func kubeEvents(t *testing.T) []item {
	ctx := context.Background()
	var out []item
	core, err := suite.Env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range core.Items {
		e := &core.Items[i]
		b, _ := json.Marshal(e)
		out = append(out, item{where: fmt.Sprintf("core/v1 Event %s/%s (%s on %s)", e.Namespace, e.Name, e.Reason, e.InvolvedObject.Name), data: b})
	}
	evs, err := suite.Env.Kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs.Items {
		e := &evs.Items[i]
		b, _ := json.Marshal(e)
		out = append(out, item{where: fmt.Sprintf("events.k8s.io/v1 Event %s/%s (%s on %s)", e.Namespace, e.Name, e.Reason, e.Regarding.Name), data: b})
	}
	return out
}

// streamMessages reads every message of every JetStream stream (KV
// buckets and object stores are streams too) with an ordered consumer.
func streamMessages(t *testing.T) []item {
	nc, js := runs.Connect(t, suite.NATSURL, natsOpts...)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []item
	names := js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		want := s.CachedInfo().State.Msgs
		if want == 0 {
			continue
		}
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		got := uint64(0)
		for got < want {
			batch, err := c.Fetch(256, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				var buf bytes.Buffer
				buf.WriteString(m.Subject())
				for k, vs := range m.Headers() {
					fmt.Fprintf(&buf, "\n%s: %s", k, strings.Join(vs, ", "))
				}
				buf.WriteByte('\n')
				buf.Write(m.Data())
				md, _ := m.Metadata()
				seq := uint64(0)
				if md != nil {
					seq = md.Sequence.Stream
				}
				out = append(out, item{where: fmt.Sprintf("stream %s seq %d (%s)", name, seq, m.Subject()), data: buf.Bytes()})
			}
			if batch.Error() != nil || n == 0 {
				t.Fatalf("stream %s: read %d of %d messages (%v)", name, got, want, batch.Error())
			}
			got += uint64(n)
		}
	}
	return out
}

// occurrences returns the offsets of value in data.
func occurrences(data []byte, value string) []int {
	var at []int
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(value))
		if i < 0 {
			return at
		}
		at = append(at, off+i)
		off += i + len(value)
	}
}

// excerpt is the text around offset at, with every secret masked so the
// failure message does not leak them in its turn.
func excerpt(data []byte, at int, secrets map[string]string) string {
	lo, hi := max(0, at-60), min(len(data), at+100)
	s := string(data[lo:hi])
	for what, v := range secrets {
		s = strings.ReplaceAll(s, v, "<"+what+">")
	}
	return s
}
