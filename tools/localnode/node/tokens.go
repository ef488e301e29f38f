package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccount tokens. The API server's ServiceAccount admission gives
// every pod a projected "kube-api-access-*" volume: a token, the
// kube-root-ca.crt ConfigMap's ca.crt and the namespace. localnode asks the
// TokenRequest API for a token bound to the pod (so it dies with the pod),
// with the projection's audience and lifetime, and rewrites the volume
// atomically before 80% of the token's lifetime has passed (at most every
// 24h), as a kubelet's token manager does: long-running pods never hold an
// expired token.

// maxTokenAge caps the time between refreshes, like a kubelet's.
const maxTokenAge = 24 * time.Hour

// refreshAfter, when set (by tests), replaces the 80% rule.
var refreshAfter atomic.Int64

// tokenRefreshAt is when a token issued at issued and expiring at expires
// is rewritten.
func tokenRefreshAt(issued, expires time.Time) time.Time {
	if d := refreshAfter.Load(); d > 0 {
		return issued.Add(time.Duration(d))
	}
	at := issued.Add(expires.Sub(issued) * 8 / 10)
	if limit := issued.Add(maxTokenAge); at.After(limit) {
		return limit
	}
	return at
}

// serviceAccountToken asks the TokenRequest API for a token bound to the
// pod, and says when to refresh it.
func (w *podWorker) serviceAccountToken(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	issued := time.Now()
	tr, err := w.n.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("request token for service account %q: %w", sa, err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	if expires.IsZero() || !expires.After(issued) {
		expires = issued.Add(time.Hour)
	}
	return tr.Status.Token, tokenRefreshAt(issued, expires), nil
}

// setTokenDue records when a projected volume's token must be renewed.
func (w *podWorker) setTokenDue(volume string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tokenDue == nil {
		w.tokenDue = map[string]time.Time{}
	}
	w.tokenDue[volume] = at
	select {
	case w.tokenWake <- struct{}{}:
	default:
	}
}

// nextTokenDue returns the volume whose token is due first.
func (w *podWorker) nextTokenDue() (string, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var name string
	var at time.Time
	for v, t := range w.tokenDue {
		if name == "" || t.Before(at) {
			name, at = v, t
		}
	}
	return name, at
}

// refreshTokens rewrites projected token volumes as they come due, until
// ctx ends. A failed refresh is retried after a short pause; the old token
// stays valid meanwhile.
func (w *podWorker) refreshTokens(ctx context.Context, pod *corev1.Pod) {
	for {
		name, at := w.nextTokenDue()
		wait := make(<-chan time.Time)
		var t *time.Timer
		if name != "" {
			t = time.NewTimer(time.Until(at))
			wait = t.C
		}
		due := false
		select {
		case <-ctx.Done():
		case <-w.tokenWake:
		case <-wait:
			due = true
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if !due {
			continue
		}
		w.mu.Lock()
		delete(w.tokenDue, name)
		w.mu.Unlock()
		for _, v := range pod.Spec.Volumes {
			if v.Name != name {
				continue
			}
			// A fresh source: the CA or namespace may have changed too.
			if err := w.setupVolume(ctx, pod, newObjectSource(w.n, pod.Namespace), v); err != nil {
				w.n.log.Warn("token refresh failed", "pod", w.ns+"/"+w.name, "volume", name, "err", err)
				w.setTokenDue(name, time.Now().Add(10*time.Second))
			} else {
				w.n.log.Debug("token refreshed", "pod", w.ns+"/"+w.name, "volume", name)
			}
		}
	}
}
