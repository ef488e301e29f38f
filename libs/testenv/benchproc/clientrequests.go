package benchproc

import (
	"io"
	"net/http"
	"testing"
)

// ClientRequests reads how many requests a Go service has sent to the API
// server so far, by HTTP method, from client-go's rest_client_requests_total
// on its /metrics at addr: unlike the API server's counts, these are the
// binary's alone. Writes and Minus apply as to Requests ("PUT", "GET").
func ClientRequests(tb testing.TB, addr string) Requests {
	tb.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatalf("scrape %s: %v", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("scrape %s: %s", addr, resp.Status)
	}
	r, err := parseClientRequests(resp.Body)
	if err != nil {
		tb.Fatalf("scrape %s: %v", addr, err)
	}
	return r
}

// parseClientRequests sums rest_client_requests_total of a metrics page by
// method.
func parseClientRequests(r io.Reader) (Requests, error) {
	return sumCounter(r, "rest_client_requests_total", func(labels map[string]string) string { return labels["method"] })
}
