package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// natsInitModes are the files nats init writes, with their modes: the
// seed, the credentials and the Secrets are secret.
var natsInitModes = map[string]fs.FileMode{
	"nats-server.conf":       0o644,
	"secrets.yaml":           0o600,
	"helm-values.yaml":       0o644,
	"agent-controller.seed":  0o600,
	"account.pub":            0o644,
	"agent-controller.creds": 0o600,
	"batch-poller.creds":     0o600,
	"agentctl.creds":         0o600,
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// natsInit runs agentctl nats init into dir and fails the test unless it
// succeeds.
func natsInit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, code := agentctl(t, append([]string{"nats", "init", "--out", dir}, args...)...)
	if code != 0 {
		t.Fatalf("nats init: exit %d:\n%s", code, out)
	}
	return out
}

// startFromConf runs nats-server from a configuration that includes the
// written one, with the settings its header says to add (listen,
// JetStream), as docs/install.md shows.
func startFromConf(t *testing.T, conf string) string {
	t.Helper()
	main := filepath.Join(filepath.Dir(conf), "server.conf")
	if err := os.WriteFile(main, []byte("include ./"+filepath.Base(conf)+"\nlisten: 127.0.0.1:-1\njetstream { store_dir: \""+
		t.TempDir()+"\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatalf("nats-server refuses %s: %v", main, err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return s.ClientURL()
}

// TestNATSInitWritesATrustChainTheServerEnforces: the files nats init
// writes configure a server that admits the written credentials, and
// those the written seed mints, and refuses everyone else.
func TestNATSInitWritesATrustChainTheServerEnforces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	out := natsInit(t, dir, "-n", "team-ns")

	for name, mode := range natsInitModes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
		if !strings.Contains(out, filepath.Join(dir, name)) {
			t.Errorf("the output does not say where %s goes:\n%s", name, out)
		}
	}
	seed := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "agent-controller.seed"))))
	account := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "account.pub"))))
	creds := map[string][]byte{}
	for _, name := range []string{"agent-controller", "batch-poller", "agentctl"} {
		creds[name] = readFile(t, filepath.Join(dir, name+".creds"))
		token, err := jwt.ParseDecoratedJWT(creds[name])
		if err != nil {
			t.Fatalf("%s.creds: %v", name, err)
		}
		uc, err := jwt.DecodeUserClaims(token)
		if err != nil {
			t.Fatalf("%s.creds: %v", name, err)
		}
		if uc.Name != name || uc.IssuerAccount != account {
			t.Errorf("%s.creds is user %q of account %q, want %q of %q", name, uc.Name, uc.IssuerAccount, name, account)
		}
		if strings.Contains(out, token) {
			t.Errorf("the output shows the %s credential", name)
		}
	}
	if strings.Contains(out, seed) {
		t.Error("the output shows the signing seed")
	}
	issuer, err := natsauth.NewIssuer([]byte(seed), account)
	if err != nil {
		t.Fatalf("the seed and account.pub do not make an issuer: %v", err)
	}

	// secrets.yaml: the Secrets the charts mount, in the namespace asked
	// for, holding exactly the written material.
	secrets := map[string]*corev1.Secret{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(readFile(t, filepath.Join(dir, "secrets.yaml"))), 4096)
	for {
		s := &corev1.Secret{}
		if err := dec.Decode(s); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if s.Kind != "Secret" || s.Namespace != "team-ns" {
			t.Errorf("%s %s/%s, want a Secret in team-ns", s.Kind, s.Namespace, s.Name)
		}
		secrets[s.Name] = s
	}
	wantData := map[string]map[string]string{
		natsAccountSecret:    {"seed": seed, "account": account},
		natsControllerSecret: {"user.creds": string(creds["agent-controller"])},
		natsPollerSecret:     {"user.creds": string(creds["batch-poller"])},
	}
	if len(secrets) != len(wantData) {
		t.Errorf("secrets.yaml holds %d Secrets, want %d", len(secrets), len(wantData))
	}
	for name, data := range wantData {
		s, ok := secrets[name]
		if !ok {
			t.Errorf("secrets.yaml lacks Secret %s", name)
			continue
		}
		if len(s.Data) != len(data) {
			t.Errorf("Secret %s has keys %v", name, s.Data)
		}
		for k, v := range data {
			if string(s.Data[k]) != v {
				t.Errorf("Secret %s key %s differs from the written file", name, k)
			}
		}
	}

	// helm-values.yaml names those Secrets where the charts read them.
	var values struct {
		AgentController struct {
			NATS map[string]string `json:"nats"`
		} `json:"agent-controller"`
		BatchPoller struct {
			NATS map[string]string `json:"nats"`
		} `json:"batch-poller"`
	}
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(dir, "helm-values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if v := values.AgentController.NATS; v["credentialsSecret"] != natsControllerSecret || v["accountSigningKeySecret"] != natsAccountSecret {
		t.Errorf("agent-controller values %v", v)
	}
	if v := values.BatchPoller.NATS; v["credentialsSecret"] != natsPollerSecret {
		t.Errorf("batch-poller values %v", v)
	}

	url := startFromConf(t, filepath.Join(dir, "nats-server.conf"))
	stranger, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := stranger.Issuer().ServiceCredentials("agent-controller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	run := natsauth.Run{Namespace: "team-a", Agent: "a1", UID: "uid-1"}
	runCreds, err := issuer.RunCredentials(run, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		creds []byte
		// check runs on the connection; nil when it must be refused.
		check func(t *testing.T, nc *nats.Conn)
	}{
		{"agent-controller.creds has the account's full rights, JetStream included", creds["agent-controller"], func(t *testing.T, nc *nats.Conn) {
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if err := events.EnsureStream(context.Background(), js, events.StreamConfig(0, 0, 0)); err != nil {
				t.Fatalf("create the stream: %v", err)
			}
		}},
		{"batch-poller.creds connects", creds["batch-poller"], func(t *testing.T, nc *nats.Conn) {
			if err := nc.Publish("agentplane.batch.team-a.a1", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}},
		{"agentctl.creds connects", creds["agentctl"], func(t *testing.T, nc *nats.Conn) {}},
		{"a run credential the written seed mints connects", runCreds, func(t *testing.T, nc *nats.Conn) {
			if err := nc.Publish(strings.TrimSuffix(run.EventSubjects(), ">")+"lifecycle", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a client without a credential is refused", nil, nil},
		{"a credential of another trust chain is refused", foreign, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []nats.Option{nats.Timeout(5 * time.Second), nats.CustomInboxPrefix(natsauth.InboxPrefix(run.UID))}
			if tc.creds != nil {
				opts = append(opts, nats.UserCredentials(eventstest.WriteCreds(t, tc.creds)))
			}
			nc, err := nats.Connect(url, opts...)
			if tc.check == nil {
				if err == nil {
					nc.Close()
					t.Fatal("connected")
				}
				if !errors.Is(err, nats.ErrAuthorization) {
					t.Fatalf("err = %v, want an authorization violation", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer nc.Close()
			tc.check(t, nc)
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := nc.LastError(); err != nil {
				t.Fatalf("the server answered: %v", err)
			}
		})
	}
}

// TestNATSInitNeverReplacesWithoutForce: an existing file stops nats
// init before it writes anything, since a new chain locks out every
// client of the old one; --force replaces every file, with its mode.
func TestNATSInitNeverReplacesWithoutForce(t *testing.T) {
	cases := []struct {
		name string
		// existing are files present before init runs.
		existing []string
		force    bool
	}{
		{"a second init into the same directory is refused", []string{"every file"}, false},
		{"one existing file is enough to refuse, and nothing is written", []string{"secrets.yaml"}, false},
		{"--force replaces every file and resets its mode", []string{"every file"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			before := map[string][]byte{}
			if tc.existing[0] == "every file" {
				natsInit(t, dir)
				for name := range natsInitModes {
					// A mode loosened by hand must not survive --force.
					if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
						t.Fatal(err)
					}
					before[name] = readFile(t, filepath.Join(dir, name))
				}
			} else {
				for _, name := range tc.existing {
					before[name] = []byte("mine\n")
					if err := os.WriteFile(filepath.Join(dir, name), before[name], 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			args := []string{"nats", "init", "--out", dir}
			if tc.force {
				args = append(args, "--force")
			}
			out, code := agentctl(t, args...)
			if !tc.force {
				if code == 0 || !strings.Contains(out, "already exist") {
					t.Fatalf("exit %d, output %q; want a refusal", code, out)
				}
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) != len(before) {
					t.Errorf("%d files in the directory, want the %d that were there", len(entries), len(before))
				}
				for name, b := range before {
					if !bytes.Equal(readFile(t, filepath.Join(dir, name)), b) {
						t.Errorf("%s was replaced", name)
					}
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for name, mode := range natsInitModes {
				p := filepath.Join(dir, name)
				if bytes.Equal(readFile(t, p), before[name]) && name != "helm-values.yaml" {
					t.Errorf("%s was not replaced", name)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
					t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode().Perm(), err, mode)
				}
			}
		})
	}
}

func TestNATSInitUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		// want is in the output, or in secrets.yaml when the command
		// succeeds.
		want string
	}{
		{"--out is required", []string{"nats", "init"}, exitUsage, "--out"},
		{"the Secrets go to agentplane-system by default", []string{"nats", "init", "--out", "DIR"}, 0, "namespace: agentplane-system"},
		{"-n moves the Secrets", []string{"-n", "platform", "nats", "init", "--out", "DIR"}, 0, "namespace: platform"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, a := range tc.args {
				if a == "DIR" {
					tc.args[i] = dir
				}
			}
			out, code := agentctl(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			if code == 0 {
				out = string(readFile(t, filepath.Join(dir, "secrets.yaml")))
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("%q lacks %q", out, tc.want)
			}
		})
	}
}

// TestEveryNATSConnectionUsesTheGlobalCredential: agentctl reads a run's
// events from a NATS server that requires a credential with --nats-creds
// or NATS_CREDS, is refused without one, and with --nats-ca insists on
// TLS.
func TestEveryNATSConnectionUsesTheGlobalCredential(t *testing.T) {
	authority, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, authority)
	ns := env.Namespace(t)
	pub, err := events.NewPublisher(events.PublisherOptions{URL: srv.URL(), ConnectOptions: srv.ClientOptions()})
	if err != nil {
		t.Fatal(err)
	}
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: ns, Agent: "a1", Uid: "uid-a1"})
	pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "started"}))
	pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "succeeded", ExitCode: ptr.To[int32](0)}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mine, err := authority.Issuer().ServiceCredentials("agentctl", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	creds := eventstest.WriteCreds(t, mine)
	ca := writeCA(t)
	kc := kubeconfig(t)
	base := []string{"--kubeconfig", kc, "-n", ns, "--nats-url", srv.URL()}

	cases := []struct {
		name string
		args []string
		env  map[string]string
		// want is in the output; fails says the command must fail.
		want  string
		fails bool
	}{
		{"--nats-creds reads the run's events", []string{"--nats-creds", creds}, nil, "agent/succeeded", false},
		{"NATS_CREDS stands for --nats-creds", nil, map[string]string{"NATS_CREDS": creds}, "agent/succeeded", false},
		{"without a credential the server refuses the connection", nil, nil, "Authorization Violation", true},
		{"a missing credentials file is named as the flag", []string{"--nats-creds", filepath.Join(t.TempDir(), "none.creds")}, nil, "--nats-creds", true},
		{"--nats-ca requires TLS of the server", []string{"--nats-creds", creds, "--nats-ca", ca}, nil, "secure connection", true},
		{"NATS_CA stands for --nats-ca", []string{"--nats-creds", creds}, map[string]string{"NATS_CA": ca}, "secure connection", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append(append(append([]string(nil), base...), tc.args...), "events", "a1")
			out, code := agentctl(t, args...)
			if (code != 0) != tc.fails {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// writeCA writes a self-signed CA certificate.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
