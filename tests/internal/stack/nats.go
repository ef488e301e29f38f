package stack

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/testcerts"
)

// The stack's NATS server is secured as an install's is
// (docs/security.md): in operator mode, it admits only users of the
// platform account, and only over TLS with a certificate of the stack's
// own CA. agent-controller gets the account's signing key and mints each
// run's own credential with it; every other client (the services,
// agentctl, the suites' own reads) gets a service credential. Every
// client is given the CA, so every suite exercises the TLS path too: the
// controller hands it to each run in the run's Secret.

// NATS is the stack's embedded NATS server and what its clients
// authenticate with.
type NATS struct {
	// URL is the server's client URL.
	URL string
	// Authority is the trust chain the server is configured with.
	Authority *natsauth.Authority
	// CredsFile is a service credential of the platform account (its full
	// rights), for the suites' own clients and the services they run.
	CredsFile string
	// SeedFile holds the platform account's signing-key seed, and Account
	// is the account's public key: agent-controller's
	// --nats-account-seed-file and --nats-account.
	SeedFile, Account string
	// CAFile is the CA that issued the server's certificate.
	CAFile string
}

// startNATS runs the embedded server with JetStream in dir, trusting a
// fresh authority, and writes its clients' files there.
func startNATS(dir string) (*NATS, *server.Server, error) {
	auth, err := natsauth.NewAuthority()
	if err != nil {
		return nil, nil, err
	}
	oc, err := jwt.DecodeOperatorClaims(auth.OperatorJWT)
	if err != nil {
		return nil, nil, fmt.Errorf("operator jwt: %w", err)
	}
	res := &server.MemAccResolver{}
	for pub, tok := range map[string]string{auth.SystemPublicKey(): auth.SystemJWT, auth.AccountPublicKey(): auth.AccountJWT} {
		if err := res.Store(pub, tok); err != nil {
			return nil, nil, fmt.Errorf("account jwt: %w", err)
		}
	}
	seed, err := auth.SigningSeed()
	if err != nil {
		return nil, nil, err
	}
	creds, err := auth.Issuer().ServiceCredentials("e2e", time.Time{})
	if err != nil {
		return nil, nil, err
	}
	// A serving certificate for 127.0.0.1 and localhost, and its CA.
	pair, err := testcerts.New()
	if err != nil {
		return nil, nil, fmt.Errorf("nats certificate: %w", err)
	}
	n := &NATS{Authority: auth, Account: auth.AccountPublicKey(),
		SeedFile: filepath.Join(dir, "nats-account.seed"), CredsFile: filepath.Join(dir, "nats-service.creds"),
		CAFile: filepath.Join(dir, "nats-ca.crt")}
	for path, b := range map[string][]byte{n.SeedFile: seed, n.CredsFile: creds, n.CAFile: pair.CAPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, nil, err
		}
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "jetstream"),
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: res, SystemAccount: auth.SystemPublicKey(),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}, TLSTimeout: 5})
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, nil, fmt.Errorf("NATS did not start")
	}
	n.URL = srv.ClientURL()
	return n, srv, nil
}

// Options are the nats.go options of a client with the service
// credential.
func (n *NATS) Options() []nats.Option {
	return []nats.Option{nats.UserCredentials(n.CredsFile), nats.RootCAs(n.CAFile)}
}

// ControllerArgs are agent-controller's NATS flags: the server, its own
// service credential, and the signing key it mints the runs' credentials
// with.
func (n *NATS) ControllerArgs() []string {
	return append(n.ServiceArgs(), "--nats-account-seed-file", n.SeedFile, "--nats-account", n.Account)
}

// ServiceArgs are a service's NATS flags (batch-poller's): the server and
// the service credential.
func (n *NATS) ServiceArgs() []string {
	return []string{"--nats-url", n.URL, "--nats-creds-file", n.CredsFile, "--nats-ca-file", n.CAFile}
}

// AgentctlArgs are agentctl's NATS flags.
func (n *NATS) AgentctlArgs() []string {
	return []string{"--nats-url", n.URL, "--nats-creds", n.CredsFile, "--nats-ca", n.CAFile}
}

// Secrets are the secret values of the stack's NATS material, by what
// they are, for suites that check that no secret leaks: the signing-key
// seed and the service credential's seed and JWT.
func (n *NATS) Secrets() (map[string]string, error) {
	out := map[string]string{}
	seed, err := n.Authority.SigningSeed()
	if err != nil {
		return nil, err
	}
	out["NATS account signing-key seed"] = string(seed)
	creds, err := os.ReadFile(n.CredsFile)
	if err != nil {
		return nil, err
	}
	if err := CredsSecrets(out, "NATS service credential", creds); err != nil {
		return nil, err
	}
	return out, nil
}

// CredsSecrets adds the seed and the JWT of the creds file creds to out,
// named after what.
func CredsSecrets(out map[string]string, what string, creds []byte) error {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	out[what+" seed"], out[what+" JWT"] = string(seed), token
	return nil
}
