package node_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

var benchJobs = flag.Int("localnode.bench-jobs", 0, "run TestBenchmarkJobs with this many trivial Jobs (0: skip it)")

// TestBenchmarkJobs measures pods started and completed per second with the
// Job controller in the loop: N Jobs running `true` are created at once and
// timed until every Job is Complete. It reports, never asserts:
//
//	go test ./localnode/node -run TestBenchmarkJobs -localnode.bench-jobs=200 -v
func TestBenchmarkJobs(t *testing.T) {
	if *benchJobs == 0 {
		t.Skip("benchmark: enable with -localnode.bench-jobs=200")
	}
	ns := env.Namespace(t)
	ctx := context.Background()
	n := *benchJobs

	// A watch counts completions without polling the API server.
	var mu sync.Mutex
	complete := map[string]bool{}
	var started, firstStart time.Time
	var lastDone time.Time
	allDone := make(chan struct{})
	lw := cache.NewListWatchFromClient(env.Kube.BatchV1().RESTClient(), "jobs", ns, fieldsEverything())
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &batchv1.Job{},
		Handler: cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
			j := obj.(*batchv1.Job)
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					mu.Lock()
					if !complete[j.Name] {
						complete[j.Name] = true
						lastDone = time.Now()
						if len(complete) == n {
							close(allDone)
						}
					}
					mu.Unlock()
				}
			}
		}},
	})
	stop := make(chan struct{})
	defer close(stop)
	go ctrl.Run(stop)
	cache.WaitForCacheSync(stop, ctrl.HasSynced)

	started = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			j := job(fmt.Sprintf("trivial-%03d", i), corev1.Container{Name: "main", Image: "trivial", Command: []string{"true"}})
			if _, err := env.Kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
				t.Errorf("create job: %v", err)
			}
		}()
	}
	wg.Wait()
	firstStart = time.Now()
	select {
	case <-allDone:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		t.Fatalf("only %d of %d jobs completed", len(complete), n)
	}
	mu.Lock()
	elapsed := lastDone.Sub(started)
	mu.Unlock()
	// Where the time goes: pod creation (by the Job controller) to the
	// container's finish (by the node), per pod.
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var firstPod, lastFinish time.Time
	var sum time.Duration
	counted := 0
	for _, p := range pods.Items {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		created, finished := p.CreationTimestamp.Time, p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time
		if firstPod.IsZero() || created.Before(firstPod) {
			firstPod = created
		}
		if finished.After(lastFinish) {
			lastFinish = finished
		}
		sum += finished.Sub(created)
		counted++
	}
	if counted > 0 {
		t.Logf("pods: first created %.2fs after the first Job create; last container finished %.2fs after; mean pod created→finished %.2fs (%d pods, 1s timestamp resolution)",
			firstPod.Sub(started).Seconds(), lastFinish.Sub(started).Seconds(), (sum / time.Duration(counted)).Seconds(), counted)
	}
	t.Logf("%d Jobs (pods started and completed, Job controller in the loop): %.2fs from first create to last Job Complete (creates took %.2fs) = %.1f pods/s",
		n, elapsed.Seconds(), firstStart.Sub(started).Seconds(), float64(n)/elapsed.Seconds())
}
