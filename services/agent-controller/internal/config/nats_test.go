package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/service/servicetest"
)

// natsFiles writes the files the NATS flags point at: a signing-key seed
// with its account, a service credential, a CA bundle, and a seed file
// holding garbage.
type natsFiles struct {
	seed, account, creds, ca, badSeed, userSeed string
}

func writeNATSFiles(t *testing.T) natsFiles {
	t.Helper()
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := a.SigningSeed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := a.Issuer().ServiceCredentials("agent-controller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// A user's seed is a valid nkey of the wrong kind.
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userSeed, err := user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return natsFiles{
		seed: eventstest.WriteFile(t, "seed", seed), account: a.AccountPublicKey(), creds: eventstest.WriteFile(t, "user.creds", creds),
		ca:      eventstest.WriteFile(t, "ca.crt", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")),
		badSeed: eventstest.WriteFile(t, "bad-seed", []byte("not a seed")), userSeed: eventstest.WriteFile(t, "user-seed", userSeed),
	}
}

func TestNATSRules(t *testing.T) {
	f := writeNATSFiles(t)
	cases := []struct {
		rule    string
		args    []string
		wantErr string
		check   func(*Config) bool
	}{
		{"without a seed no run gets a credential and the controller connects without one", nil, "", func(c *Config) bool {
			return c.NATSIssuer == nil && c.NATS.CredsFile == "" && c.NATSCA == nil && c.NATSCredentialTTL == 24*time.Hour
		}},
		{"a signing-key seed with its account loads the issuer of the runs' credentials",
			[]string{"--nats-account-seed-file=" + f.seed, "--nats-account=" + f.account}, "", func(c *Config) bool {
				return c.NATSIssuer != nil && c.NATSIssuer.Account() == f.account
			}},
		{"a seed alone is read as the account's own seed: its key is the account",
			[]string{"--nats-account-seed-file=" + f.seed}, "", func(c *Config) bool {
				return c.NATSIssuer != nil && c.NATSIssuer.Account() != f.account && strings.HasPrefix(c.NATSIssuer.Account(), "A")
			}},
		{"a seed file that is no seed is a startup error naming the flag", []string{"--nats-account-seed-file=" + f.badSeed}, "--nats-account-seed-file", nil},
		{"a seed of a user rather than an account is refused by flag", []string{"--nats-account-seed-file=" + f.userSeed}, "--nats-account-seed-file", nil},
		{"a seed file that cannot be read is refused by flag", []string{"--nats-account-seed-file=" + f.seed + ".missing"}, "--nats-account-seed-file", nil},
		{"an account that is no account public key is refused", []string{"--nats-account-seed-file=" + f.seed, "--nats-account=UABC"}, "--nats-account", nil},
		{"an account without a seed is refused", []string{"--nats-account=" + f.account}, "--nats-account / NATS_ACCOUNT needs --nats-account-seed-file", nil},
		{"the credential TTL must be positive", []string{"--nats-credential-ttl=0s"}, "--nats-credential-ttl", nil},
		{"the controller's own creds file is checked at startup", []string{"--nats-creds-file=" + f.badSeed}, "--nats-creds-file", nil},
		{"a missing CA file is refused by flag", []string{"--nats-ca-file=" + f.ca + ".missing"}, "--nats-ca-file", nil},
		{"the CA is read once, to hand to every run", []string{"--nats-ca-file=" + f.ca, "--nats-creds-file=" + f.creds}, "", func(c *Config) bool {
			return strings.Contains(string(c.NATSCA), "BEGIN CERTIFICATE") && c.NATS.CredsFile == f.creds
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cfg, err := Parse(c.args, env(nil), io.Discard)
			servicetest.CheckParsed(t, cfg, err, c.wantErr, c.check)
		})
	}
}

// TestABadSeedIsNeverQuoted: the error about an unusable seed names the
// flag, never the file's content.
func TestABadSeedIsNeverQuoted(t *testing.T) {
	dir := t.TempDir()
	const secret = "SAXXXXTHISISNOTAVALIDSEEDBUTASECRETLOOKINGVALUE"
	p := filepath.Join(dir, "seed")
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]string{"--nats-account-seed-file=" + p}, env(nil), io.Discard)
	if err == nil {
		t.Fatal("a bad seed was accepted")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error quotes the seed: %v", err)
	}
}
