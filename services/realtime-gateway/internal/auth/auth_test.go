package auth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentplane/agentplane/libs/grpcauth"
)

// reviewer is an apiserver that accepts the token "good" and allows only
// the verb create, counting the reviews it was asked for.
type reviewer struct {
	kube           *fake.Clientset
	tokens, access atomic.Int32
}

func newReviewer() *reviewer {
	r := &reviewer{kube: fake.NewClientset()}
	r.kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.tokens.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice", UID: "u-1"}}
		}
		return true, tr, nil
	})
	r.kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.access.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = sar.Spec.ResourceAttributes.Verb == VerbCreate
		return true, sar, nil
	})
	return r
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
}

// TestAuthenticatorRemembersAcceptedTokensForTheTTL checks that an
// accepted token is reviewed once per TTL, a refused one every time, and
// a zero TTL remembers nothing.
func TestAuthenticatorRemembersAcceptedTokensForTheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := newReviewer()
	a := grpcauth.NewAuthenticator(r.kube, grpcauth.Options{TTL: time.Minute, Clock: clk})
	for range 3 {
		if u, err := a.Authenticate(withToken("good")); err != nil || u.Name != "alice" {
			t.Fatalf("Authenticate = %+v, %v", u, err)
		}
	}
	if n := r.tokens.Load(); n != 1 {
		t.Fatalf("%d token reviews within the TTL, want 1", n)
	}
	clk.Step(time.Minute + time.Nanosecond)
	if _, err := a.Authenticate(withToken("good")); err != nil {
		t.Fatal(err)
	}
	if n := r.tokens.Load(); n != 2 {
		t.Fatalf("%d token reviews after the TTL, want 2", n)
	}
	for range 2 {
		if _, err := a.Authenticate(withToken("bad")); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("refused token: err = %v", err)
		}
	}
	if n := r.tokens.Load(); n != 4 {
		t.Fatalf("%d token reviews, want a refused token reviewed every time", n)
	}

	uncached := NewAuthenticator(r.kube, 0, nil)
	for range 2 {
		if _, err := uncached.Authenticate(withToken("good")); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.tokens.Load(); n != 6 {
		t.Fatalf("%d token reviews, want every one reviewed with a zero TTL", n)
	}
}

// TestAuthorizerRemembersEachAnswerForItsTTL checks that allowed and
// denied answers are kept apart, each for its own TTL.
func TestAuthorizerRemembersEachAnswerForItsTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := newReviewer()
	a := NewAuthorizer(r.kube, time.Minute, 10*time.Second)
	a.cache = cache.NewLRUExpireCacheWithClock(maxCacheEntries, clk)
	u := User{Name: "alice", UID: "u-1"}
	check := func(verb string, wantAllowed bool, wantReviews int32) {
		t.Helper()
		err := a.Authorize(context.Background(), u, verb, "team", "agent")
		if allowed := err == nil; allowed != wantAllowed || (!allowed && status.Code(err) != codes.PermissionDenied) {
			t.Fatalf("%s: err = %v, want allowed %v", verb, err, wantAllowed)
		}
		if n := r.access.Load(); n != wantReviews {
			t.Fatalf("%s: %d access reviews, want %d", verb, n, wantReviews)
		}
	}
	check(VerbCreate, true, 1)
	check(VerbCreate, true, 1)
	check(VerbGet, false, 2)
	check(VerbGet, false, 2)
	clk.Step(10*time.Second + time.Nanosecond)
	check(VerbGet, false, 3)   // the denial expired
	check(VerbCreate, true, 3) // the permission did not
	clk.Step(time.Minute)
	check(VerbCreate, true, 4)
}
