package helm

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// natsAuthFlags are every flag of NATS authentication the charts pass.
var natsAuthFlags = []string{"--nats-creds-file", "--nats-ca-file", "--nats-cert-file", "--nats-key-file",
	"--nats-account-seed-file", "--nats-account"}

// named returns the element of a Deployment's list (volumes in the pod
// spec, volumeMounts or env in the container) with that name, nil when
// there is none.
func named(t *testing.T, r *rendered, deployment, list, name string) map[string]any {
	t.Helper()
	var items []any
	if list == "volumes" {
		items, _, _ = unstructured.NestedSlice(podSpec(t, r, deployment), "volumes")
	} else {
		items, _, _ = unstructured.NestedSlice(r.container(t, deployment), list)
	}
	for _, it := range items {
		if m := it.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// wantSecretMount checks that a Deployment mounts only key of Secret
// secret, read-only with mode 0400, at dir, and passes flag=dir/key.
func wantSecretMount(t *testing.T, r *rendered, deployment, volume, secret, key, dir, flag string) {
	t.Helper()
	v := named(t, r, deployment, "volumes", volume)
	if v == nil {
		t.Fatalf("%s has no volume %s", deployment, volume)
	}
	wantField(t, v, secret, "secret", "secretName")
	wantField(t, v, 0o400, "secret", "defaultMode")
	wantField(t, v, []any{map[string]any{"key": key, "path": key}}, "secret", "items")
	m := named(t, r, deployment, "volumeMounts", volume)
	if m == nil {
		t.Fatalf("%s does not mount volume %s", deployment, volume)
	}
	wantField(t, m, dir, "mountPath")
	wantField(t, m, true, "readOnly")
	wantArgs(t, r, deployment, fmt.Sprintf("--%s=%s/%s", flag, dir, key))
}

// wantNoNATSAuth checks that nothing of NATS authentication renders for
// a Deployment: no flag, volume, mount or variable, and no RBAC for run
// credentials.
func wantNoNATSAuth(t *testing.T, r *rendered, deployment string) {
	t.Helper()
	wantNoFlag(t, r, deployment, natsAuthFlags...)
	for _, list := range []string{"volumes", "volumeMounts"} {
		for _, n := range []string{"nats-credentials", "nats-ca", "nats-account"} {
			if named(t, r, deployment, list, n) != nil {
				t.Errorf("%s has %s %s", deployment, list, n)
			}
		}
	}
	if named(t, r, deployment, "env", "NATS_ACCOUNT") != nil {
		t.Errorf("%s sets NATS_ACCOUNT", deployment)
	}
	wantAbsent(t, r, "ClusterRole", "", releaseNS+"-agent-controller-nats-runs")
	wantAbsent(t, r, "ClusterRoleBinding", "", releaseNS+"-agent-controller-nats-runs")
}

// natsInitValues are the values `agentctl nats init` writes into
// helm-values.yaml (tools/agentctl/natsinit.go), for the umbrella chart.
const natsInitValues = `
agent-controller:
  nats:
    credentialsSecret: agentplane-nats-agent-controller
    accountSigningKeySecret: agentplane-nats-account
batch-poller:
  nats:
    credentialsSecret: agentplane-nats-batch-poller
`

// natsRules are the rules of NATS authentication (docs/security.md).
func natsRules() []rule {
	const ac, bp, u = "agent-controller", "batch-poller", umbrella
	const credsDir, caDir, accountDir = "/etc/agentplane/nats/credentials", "/etc/agentplane/nats/ca", "/etc/agentplane/nats/account"
	return []rule{
		{name: "agent-controller: without nats values nothing of NATS authentication renders", chart: ac,
			values: "natsUrl: nats://nats:4222\nbatch: {enabled: true}", check: func(t *testing.T, r *rendered) {
				wantNoNATSAuth(t, r, ac)
				// The batch token is still mounted, alone.
				if vs, _, _ := unstructured.NestedSlice(podSpec(t, r, ac), "volumes"); len(vs) != 1 {
					t.Errorf("volumes %v, want the batch-poller token only", vs)
				}
			}},
		{name: "batch-poller: without nats values nothing of NATS authentication renders", chart: bp,
			values: "natsUrl: nats://nats:4222", check: func(t *testing.T, r *rendered) {
				wantNoNATSAuth(t, r, bp)
				if _, ok := podSpec(t, r, bp)["volumes"]; ok {
					t.Error("volumes rendered")
				}
				if _, ok := r.container(t, bp)["volumeMounts"]; ok {
					t.Error("volumeMounts rendered")
				}
			}},
		{name: "agentplane: without nats values nothing of NATS authentication renders", chart: u,
			values: "global: {batch: {enabled: true}, natsUrl: 'nats://nats:4222'}", check: func(t *testing.T, r *rendered) {
				wantNoNATSAuth(t, r, ac)
				wantNoNATSAuth(t, r, bp)
			}},
		{name: "agent-controller: nats.credentialsSecret mounts user.creds read-only 0400 as --nats-creds-file", chart: ac,
			values: "nats: {credentialsSecret: ac-creds}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, ac, "nats-credentials", "ac-creds", "user.creds", credsDir, "nats-creds-file")
				wantNoFlag(t, r, ac, "--nats-ca-file", "--nats-account-seed-file", "--nats-account")
				wantAbsent(t, r, "ClusterRole", "", releaseNS+"-agent-controller-nats-runs")
			}},
		{name: "agent-controller: nats.caSecret mounts ca.crt read-only 0400 as --nats-ca-file", chart: ac,
			values: "nats: {caSecret: nats-ca}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, ac, "nats-ca", "nats-ca", "ca.crt", caDir, "nats-ca-file")
				wantNoFlag(t, r, ac, "--nats-creds-file")
			}},
		{name: "agent-controller: global.nats.caSecret is the default CA, nats.caSecret wins over it", chart: ac,
			values: "global: {nats: {caSecret: global-ca}}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, ac, "nats-ca", "global-ca", "ca.crt", caDir, "nats-ca-file")
				own := mustRender(t, ac, "global: {nats: {caSecret: global-ca}}\nnats: {caSecret: own-ca}")
				wantField(t, named(t, own, ac, "volumes", "nats-ca"), "own-ca", "secret", "secretName")
			}},
		{name: "agent-controller: nats.accountSigningKeySecret mounts only the seed and takes the account key from the Secret", chart: ac,
			values: "nats: {accountSigningKeySecret: nats-account}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, ac, "nats-account", "nats-account", "seed", accountDir, "nats-account-seed-file")
				// Kubernetes expands $(NATS_ACCOUNT) in args from the
				// container's environment.
				wantArgs(t, r, ac, "--nats-account=$(NATS_ACCOUNT)")
				e := named(t, r, ac, "env", "NATS_ACCOUNT")
				if e == nil {
					t.Fatal("NATS_ACCOUNT is not set")
				}
				wantField(t, e, "nats-account", "valueFrom", "secretKeyRef", "name")
				wantField(t, e, "account", "valueFrom", "secretKeyRef", "key")
				if _, ok := e["value"]; ok {
					t.Error("NATS_ACCOUNT has a literal value")
				}
			}},
		{name: "agent-controller: nats.accountSigningKeySecret lets it create and read back the runs' credential Secrets, nothing more", chart: ac,
			values: "nats: {accountSigningKeySecret: nats-account}", check: func(t *testing.T, r *rendered) {
				cr := r.get(t, "ClusterRole", "", releaseNS+"-agent-controller-nats-runs")
				rules := rulesOf(t, cr)
				if len(rules) != 1 || fmt.Sprint(rules[0]["resources"]) != "[secrets]" || fmt.Sprint(rules[0]["verbs"]) != "[create get]" {
					t.Errorf("rules %v", rules)
				}
				crb := r.get(t, "ClusterRoleBinding", "", releaseNS+"-agent-controller-nats-runs")
				wantField(t, crb.Object, releaseNS+"-agent-controller-nats-runs", "roleRef", "name")
				wantField(t, crb.Object, "agent-controller", "subjects", "0", "name")
				wantField(t, crb.Object, releaseNS, "subjects", "0", "namespace")
			}},
		{name: "agent-controller: the NATS Secrets and the batch-poller token are mounted together", chart: ac,
			values: "batch: {enabled: true}\nnats: {credentialsSecret: c, caSecret: ca, accountSigningKeySecret: k}", check: func(t *testing.T, r *rendered) {
				for _, v := range []string{"batch-poller-token", "nats-credentials", "nats-ca", "nats-account"} {
					if named(t, r, ac, "volumes", v) == nil || named(t, r, ac, "volumeMounts", v) == nil {
						t.Errorf("volume %s is not mounted", v)
					}
				}
				wantArgs(t, r, ac, "--batch-poller-token-file=/var/run/secrets/agentplane/batch-poller/token",
					"--nats-creds-file="+credsDir+"/user.creds", "--nats-ca-file="+caDir+"/ca.crt", "--nats-account-seed-file="+accountDir+"/seed")
			}},
		{name: "batch-poller: nats.credentialsSecret and nats.caSecret mount user.creds and ca.crt read-only 0400", chart: bp,
			values: "nats: {credentialsSecret: bp-creds, caSecret: nats-ca}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, bp, "nats-credentials", "bp-creds", "user.creds", credsDir, "nats-creds-file")
				wantSecretMount(t, r, bp, "nats-ca", "nats-ca", "ca.crt", caDir, "nats-ca-file")
			}},
		{name: "batch-poller: global.nats.caSecret is the default CA", chart: bp,
			values: "global: {nats: {caSecret: global-ca}}", check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, bp, "nats-ca", "global-ca", "ca.crt", caDir, "nats-ca-file")
				wantNoFlag(t, r, bp, "--nats-creds-file")
			}},
		{name: "agentplane: the values agentctl nats init writes give each service its own credential and the controller the signing key", chart: u,
			values: "global: {batch: {enabled: true}, natsUrl: 'nats://nats:4222', nats: {caSecret: nats-ca}}" + natsInitValues,
			check: func(t *testing.T, r *rendered) {
				wantSecretMount(t, r, ac, "nats-credentials", "agentplane-nats-agent-controller", "user.creds", credsDir, "nats-creds-file")
				wantSecretMount(t, r, ac, "nats-account", "agentplane-nats-account", "seed", accountDir, "nats-account-seed-file")
				wantSecretMount(t, r, ac, "nats-ca", "nats-ca", "ca.crt", caDir, "nats-ca-file")
				wantSecretMount(t, r, bp, "nats-credentials", "agentplane-nats-batch-poller", "user.creds", credsDir, "nats-creds-file")
				wantSecretMount(t, r, bp, "nats-ca", "nats-ca", "ca.crt", caDir, "nats-ca-file")
				// Only the agent-controller holds the signing key.
				if named(t, r, bp, "volumes", "nats-account") != nil || named(t, r, bp, "env", "NATS_ACCOUNT") != nil {
					t.Error("batch-poller is given the account's signing key")
				}
				wantNoFlag(t, r, bp, "--nats-account-seed-file", "--nats-account")
				r.get(t, "ClusterRole", "", releaseNS+"-agent-controller-nats-runs")
			}},
		{name: "agentplane: the NOTES say when NATS runs without credentials", chart: u,
			values: "global: {natsUrl: 'nats://nats:4222'}", check: func(t *testing.T, r *rendered) {
				if !strings.Contains(r.notes, "NATS             nats://nats:4222, without credentials") {
					t.Errorf("NOTES:\n%s", r.notes)
				}
				with := mustRender(t, u, "global: {natsUrl: 'nats://nats:4222'}"+natsInitValues)
				if !strings.Contains(with.notes, "NATS             nats://nats:4222, a credential per run") {
					t.Errorf("NOTES with NATS authentication:\n%s", with.notes)
				}
			}},
		{name: "agent-controller: the NOTES say when run events go to NATS without credentials", chart: ac,
			values: "natsUrl: nats://nats:4222", check: func(t *testing.T, r *rendered) {
				if !strings.Contains(r.notes, "at nats://nats:4222, without credentials") {
					t.Errorf("NOTES:\n%s", r.notes)
				}
				with := mustRender(t, ac, "natsUrl: nats://nats:4222\nnats: {accountSigningKeySecret: k}")
				if !strings.Contains(with.notes, "at nats://nats:4222, each run with a credential of its own") {
					t.Errorf("NOTES with NATS authentication:\n%s", with.notes)
				}
			}},
		{name: "agentplane: the charts render no Secret of NATS material, they mount the ones named", chart: u,
			values: "global: {batch: {enabled: true}, nats: {caSecret: nats-ca}}" + natsInitValues, check: func(t *testing.T, r *rendered) {
				wantNone(t, r, "Secret")
			}},
	}
}
