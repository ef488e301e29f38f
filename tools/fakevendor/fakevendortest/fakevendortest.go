// Package fakevendortest starts a fakevendor server for the life of one
// test, for the packages that test against it.
package fakevendortest

import (
	"testing"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

// Key is the API key Start gives a server whose options name none.
const Key = "sk-test-key"

// Start runs a fake vendor until t ends and returns it with its base URL.
// opts.APIKey defaults to Key.
func Start(t testing.TB, opts fakevendor.Options) (*fakevendor.Server, string) {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = Key
	}
	srv := fakevendor.New(opts)
	base, err := srv.Start()
	if err != nil {
		t.Fatalf("start fakevendor: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, base
}
