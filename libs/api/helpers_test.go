package api_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkAdmission creates obj and holds the API server's answer to want:
// with want empty the object must be accepted; else refused by validation
// with a message naming every substring of want. A refusal is quoted up
// to 4 KiB, as a message listing many fields can be long.
func checkAdmission(t *testing.T, obj client.Object, want []string) {
	t.Helper()
	err := env.Client.Create(context.Background(), obj)
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("accepted")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("refused for another reason than validation: %v", err)
	}
	msg := err.Error()
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not name %q: %s", w, msg)
		}
	}
}
