package fakevendor_test

import (
	"testing"

	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/fakevendor/fakevendortest"
)

const testKey = fakevendortest.Key

// start runs a fake vendor for one test and returns it with its base URL.
func start(t *testing.T, opts fakevendor.Options) (*fakevendor.Server, string) {
	return fakevendortest.Start(t, opts)
}
