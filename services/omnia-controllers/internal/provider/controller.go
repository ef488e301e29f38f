package provider

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "provider"

// Reconciler reconciles Providers.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the credential and model events.
	Recorder events.EventRecorder
	// HTTP makes the health check and the credential probe;
	// http.DefaultClient when nil.
	HTTP *http.Client
	// ProbeCredentials turns the vendor credential probe on.
	ProbeCredentials bool
	// ProbeOverHTTP lets the probe use plain http to loopback and
	// cluster-local hosts; otherwise it goes only over https.
	ProbeOverHTTP bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	probes probeCache
}

// Reconcile checks one Provider.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &omniav1.Provider{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			// The delete event brings the pass here: the verdict goes with
			// the Provider.
			r.probes.Forget(req.String())
			metrics.DeleteProvider(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// The gauge shows the Ready condition stored when the pass ends,
	// however it ends.
	ready := meta.IsStatusConditionTrue(p.Status.Conditions, omniav1.ConditionReady)
	defer func() { metrics.SetProviderReady(req.Namespace, req.Name, ready) }()
	now := kubeutil.Clock(r.Now)
	hc := r.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	s := Snapshot{Provider: p, Now: kubeutil.PassTime(now)}
	var err error
	if c := p.Spec.Credential; c != nil && c.SecretRef != nil {
		if s.CredentialSecret, err = r.secret(ctx, p.Namespace, c.SecretRef.Name); err != nil {
			return reconcile.Result{}, err
		}
	}
	if a := p.Spec.Auth; a != nil && a.CredentialsSecretRef != nil {
		if s.AuthSecret, err = r.secret(ctx, p.Namespace, a.CredentialsSecretRef.Name); err != nil {
			return reconcile.Result{}, err
		}
	}
	if u := HealthURL(&p.Spec); u != "" {
		s.Health = &HealthResult{URL: u, Err: CheckHealth(ctx, hc, u)}
	}
	if r.ProbeCredentials && s.CredentialSecret != nil && (s.Health == nil || s.Health.Err == nil) {
		if key, value, ok := CredentialValue(&p.Spec, s.CredentialSecret); ok && !IsPlaceholder(value) {
			if err := checkProbeURL(baseURL(&p.Spec), r.ProbeOverHTTP); err != nil {
				s.Probe = &ProbeResult{Verdict: ProbeRefused, Detail: err.Error()}
			} else {
				fingerprint := fmt.Sprintf("%s@%s|%s", s.CredentialSecret.Name, s.CredentialSecret.ResourceVersion, key)
				res := r.probes.ProbeCredential(ctx, hc, &p.Spec, value, req.String(), fingerprint, now())
				s.Probe = &res
			}
		}
	}
	d := Decide(s)
	kubeutil.Emit(r.Recorder, p, "Check", d.Events)
	if d.Changed {
		p.Status = d.Status
		// A 409 is returned, not dropped: this controller's watch filters
		// status-only events, so no later event would bring the pass back.
		if err := r.Client.Status().Update(ctx, p); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of Provider %s: %w", req, err)
		}
		ready = meta.IsStatusConditionTrue(d.Status.Conditions, omniav1.ConditionReady)
	}
	if d.Retry != nil {
		return reconcile.Result{}, d.Retry
	}
	return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
}

// secret reads a Secret the Provider names; nil when it does not exist.
func (r *Reconciler) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return kubeutil.Lookup[corev1.Secret](ctx, r.Client, types.NamespacedName{Namespace: ns, Name: name})
}

// SetupWithManager wires the controller. The Provider is watched for spec
// changes only, so the controller's own status write does not trigger a
// second health check; Secrets it reads map back to it. rec, when not nil,
// is called instead of r (tests count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	providers := func() client.ObjectList { return &omniav1.ProviderList{} }
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.Provider{}, SpecOnly: true}.Builder(mgr).
		Watches(&corev1.Secret{}, kubeutil.EnqueueByIndex(r.Client, providers, index.ProviderSecret))
	return kubeutil.Complete(b, r, rec)
}
