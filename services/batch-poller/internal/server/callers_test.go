package server

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/vendors"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// audience is the audience the stack's server asks of tokens, the
// binary's default.
const audience = "agentplane-batch-poller"

// serviceAccount creates the ServiceAccount ns/name (once) and returns
// the username a TokenReview gives its tokens.
func serviceAccount(t *testing.T, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return grpcauth.ServiceAccountUsername(ns, name)
}

// token issues a token of the ServiceAccount ns/name (created if needed)
// for audiences; none gives a plain API token, for the apiserver's own.
func token(t *testing.T, ns, name string, audiences ...string) string {
	t.Helper()
	serviceAccount(t, ns, name)
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bearerToken is per-RPC credentials with a fixed token, as an attacker
// holding one would send it.
type bearerToken string

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearerToken) RequireTransportSecurity() bool { return false }

// dialAs returns a connection to addr sending tok on every call; none
// when tok is empty.
func dialAs(t *testing.T, addr, tok string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(tok)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// clientAs is dialAs for BatchService.
func clientAs(t *testing.T, addr, tok string) batchv1.BatchServiceClient {
	return batchv1.NewBatchServiceClient(dialAs(t, addr, tok))
}

// answerOf reads the result event out of an ended batch's CLI lines,
// written for model.
func answerOf(model string, got *batchv1.GetResponse) string {
	p := vendors.Route(model).NewParser()
	answer := ""
	for _, l := range got.GetLines() {
		evs, _ := p.Parse([]byte(l))
		for _, e := range evs {
			if e.Kind == vendors.KindResult {
				answer = e.Text
			}
		}
	}
	return answer
}
