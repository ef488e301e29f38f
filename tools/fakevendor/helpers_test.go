package fakevendor_test

import (
	"testing"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

const testKey = "sk-test-key"

// start runs a fake vendor for one test and returns it with its base URL.
func start(t *testing.T, opts fakevendor.Options) (*fakevendor.Server, string) {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	srv := fakevendor.New(opts)
	base, err := srv.Start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, base
}
