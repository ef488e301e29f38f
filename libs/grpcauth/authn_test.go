package grpcauth

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviewer is an apiserver that accepts the token "good" for the audience
// "batch" and the token "plain" for its own audience only, answering with
// the audiences a real one would, and counts the reviews.
type reviewer struct {
	kube    *fake.Clientset
	reviews atomic.Int32
}

func newReviewer() *reviewer {
	r := &reviewer{kube: fake.NewClientset()}
	r.kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		tokenAud := map[string]string{"good": "batch", "plain": "https://kubernetes.default.svc"}[tr.Spec.Token]
		asked := tr.Spec.Audiences
		if len(asked) == 0 {
			asked = []string{"https://kubernetes.default.svc"}
		}
		if tokenAud != "" && slices.Contains(asked, tokenAud) {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{tokenAud},
				User: authnv1.UserInfo{Username: "system:serviceaccount:ns:" + tr.Spec.Token, UID: "u-1"}}
		}
		return true, tr, nil
	})
	return r
}

func withAuthorization(v string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", v))
}

func TestAuthenticatorRefusesWhatIsNotAValidTokenForItsAudience(t *testing.T) {
	r := newReviewer()
	batch := NewAuthenticator(r.kube, Options{Audiences: []string{"batch"}})
	anyAud := NewAuthenticator(r.kube, Options{})
	cases := []struct {
		name string
		a    *Authenticator
		ctx  context.Context
		code codes.Code
		user string
	}{
		{"a call without metadata is unauthenticated", batch, context.Background(), codes.Unauthenticated, ""},
		{"a scheme other than Bearer is unauthenticated", batch, withAuthorization("Basic Z29vZA=="), codes.Unauthenticated, ""},
		{"an empty bearer token is unauthenticated", batch, withAuthorization("Bearer  "), codes.Unauthenticated, ""},
		{"a token the apiserver refuses is unauthenticated", batch, withAuthorization("Bearer forged"), codes.Unauthenticated, ""},
		{"a token without the audience is unauthenticated", batch, withAuthorization("Bearer plain"), codes.Unauthenticated, ""},
		{"a token for the audience names its ServiceAccount", batch, withAuthorization("bearer good"), codes.OK, "system:serviceaccount:ns:good"},
		{"without audiences the apiserver's own are accepted", anyAud, withAuthorization("Bearer plain"), codes.OK, "system:serviceaccount:ns:plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.a.Authenticate(tc.ctx)
			if status.Code(err) != tc.code || u.Name != tc.user {
				t.Fatalf("Authenticate = %+v, %v; want %q, %v", u, err, tc.user, tc.code)
			}
		})
	}
}

// TestRefusalsNameTheExpectedAudience: a caller refused for its audience
// learns which one to ask for; without audiences the message is as before.
func TestRefusalsNameTheExpectedAudience(t *testing.T) {
	r := newReviewer()
	const want = `a token issued for audience "batch" is expected`
	for _, tc := range []struct {
		name  string
		a     *Authenticator
		token string
		named bool
	}{
		{"a plain API token refused for the audience names it", NewAuthenticator(r.kube, Options{Audiences: []string{"batch"}}), "plain", true},
		{"a forged token refused for the audience names it", NewAuthenticator(r.kube, Options{Audiences: []string{"batch"}}), "forged", true},
		{"without audiences no audience is named", NewAuthenticator(r.kube, Options{}), "forged", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.a.Authenticate(withAuthorization("Bearer " + tc.token))
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.Unauthenticated || strings.Contains(msg, want) != tc.named {
				t.Fatalf("err = %v; want Unauthenticated, naming the audience: %v", err, tc.named)
			}
		})
	}
}

// TestAuthenticatorChecksTheAudiencesOfTheAnswer covers an authenticator
// that ignores spec.audiences: its answer names none of them.
func TestAuthenticatorChecksTheAudiencesOfTheAnswer(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "someone"}}
		return true, tr, nil
	})
	_, err := NewAuthenticator(kube, Options{Audiences: []string{"batch"}}).Authenticate(withAuthorization("Bearer x"))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("err = %v, want Unauthenticated", err)
	}
}

func TestAuthenticatorRemembersAcceptedTokensForTheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := newReviewer()
	a := NewAuthenticator(r.kube, Options{TTL: time.Minute, Audiences: []string{"batch"}, Clock: clk})
	for range 3 {
		if _, err := a.Authenticate(withAuthorization("Bearer good")); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.reviews.Load(); n != 1 {
		t.Fatalf("%d reviews within the TTL, want 1", n)
	}
	clk.Step(time.Minute + time.Nanosecond)
	if _, err := a.Authenticate(withAuthorization("Bearer good")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = a.Authenticate(withAuthorization("Bearer plain"))
	}
	if n := r.reviews.Load(); n != 4 {
		t.Fatalf("%d reviews, want one after the TTL and one per refused token", n)
	}
}
