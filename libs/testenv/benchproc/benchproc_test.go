package benchproc

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testenv"
)

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{name: "utime and stime are fields 14 and 15, in ticks of 10 ms",
			stat: "42 (agent) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 8 0 100 1000 200",
			want: 2800 * time.Millisecond},
		{name: "a command name with spaces and parentheses ends at the last parenthesis",
			stat: "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 8 0 100 1000 200",
			want: 100 * time.Millisecond},
		{name: "no command name is an error", stat: "42 agent S 1", err: true},
		{name: "too few fields is an error", stat: "42 (agent) S 1 42", err: true},
		{name: "a field that is no number is an error",
			stat: "42 (agent) S 1 42 42 0 -1 4194560 100 0 0 0 x 30 0 0 20 0 8 0 100 1000 200", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPU([]byte(tc.stat))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

const page = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="jobs",subresource="",verb="POST"} 10
apiserver_request_total{code="409",component="apiserver",resource="jobs",subresource="",verb="POST"} 2
apiserver_request_total{code="200",component="apiserver",resource="agents",subresource="status",verb="PATCH"} 12
apiserver_request_total{code="200",component="apiserver",resource="agents",subresource="",verb="LIST"} 1
apiserver_request_total{code="200",component="apiserver",resource="events",subresource="",verb="DELETE"} 3
`

func TestRequests(t *testing.T) {
	r, err := parseRequests(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("codes of one verb and resource add up", func(t *testing.T) {
		if r["POST jobs"] != 12 || r["PATCH agents/status"] != 12 || r["LIST agents"] != 1 {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("writes are POST, PUT, PATCH and DELETE", func(t *testing.T) {
		if got := r.Writes(); got != 27 {
			t.Fatalf("Writes = %v, want 27", got)
		}
	})
	t.Run("writes count by the verb alone too", func(t *testing.T) {
		if got := (Requests{"PUT": 2, "GET": 5, "DELETE": 1}).Writes(); got != 3 {
			t.Fatalf("Writes = %v, want 3", got)
		}
	})
	t.Run("minus drops what the other counted, and nothing goes below zero", func(t *testing.T) {
		got := r.Minus(Requests{"POST jobs": 12, "LIST agents": 5})
		if _, ok := got["POST jobs"]; ok || got["LIST agents"] != 0 || got["PATCH agents/status"] != 12 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("per run names the most frequent first and leaves out the rare", func(t *testing.T) {
		got := Requests{"POST jobs": 100, "PATCH agents/status": 200, "GET leases": 0.5}.PerRun(100)
		if want := "3.00: 2.00 PATCH agents/status, 1.00 POST jobs"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("a client's requests count by method", func(t *testing.T) {
		got, err := parseClientRequests(strings.NewReader(`# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 7
rest_client_requests_total{code="404",host="127.0.0.1:6443",method="GET"} 1
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 2
`))
		if err != nil || got["GET"] != 8 || got["PUT"] != 2 || got.Writes() != 2 {
			t.Fatalf("got %v, %v", got, err)
		}
	})
	t.Run("a page without the counter is an error", func(t *testing.T) {
		if _, err := parseRequests(strings.NewReader("# TYPE other counter\nother 1\n")); err == nil {
			t.Fatal("no error")
		}
	})
}

// TestProcess runs a real process and reads its memory and CPU.
func TestProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	p := Start(t, exec.Command(sleep, "30"))
	// Read while the process may still be inside exec, when a new memory
	// map replaces the old, the figures settle once it runs.
	testenv.Eventually(t, 5*time.Second, "RSS read", func() error {
		rss := p.RSSMiB()
		if peak := p.PeakRSSMiB(); rss <= 0 || peak < rss || p.RSSFileMiB() <= 0 {
			return fmt.Errorf("RSS %.2f MiB (file %.2f), peak %.2f MiB: want a positive RSS at most the peak", rss, p.RSSFileMiB(), peak)
		}
		return nil
	})
	if cpu := p.CPU(t); cpu < 0 {
		t.Fatalf("CPU %v", cpu)
	}
	p.Stop()
	p.Stop() // a second Stop does nothing
	if p.RSSMiB() != 0 {
		t.Fatalf("RSS %.2f MiB after Stop, want 0 for a process gone", p.RSSMiB())
	}
}

// TestWaitReady: it returns once /readyz answers 200, not before.
func TestWaitReady(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	WaitReady(t, strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls, want the third to be the first ready", n)
	}
}
