package natsauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Authority is the NATS trust chain of one installation: the operator,
// the system account the server needs for its own traffic, and the
// platform account every agentplane client belongs to, with the signing
// key that mints its users.
type Authority struct {
	// Operator signs the accounts; its seed is needed only to re-issue
	// them.
	Operator nkeys.KeyPair
	// OperatorJWT is trusted by nats-server (the operator setting).
	OperatorJWT string
	// System is the server's system account.
	System    nkeys.KeyPair
	SystemJWT string
	// Account is the platform account, with JetStream enabled.
	Account    nkeys.KeyPair
	AccountJWT string
	// SigningKey is the account's signing key: users are signed with it,
	// so the account's own seed can stay offline.
	SigningKey nkeys.KeyPair
}

// NewAuthority generates a fresh trust chain.
func NewAuthority() (*Authority, error) {
	a := &Authority{}
	var err error
	if a.Operator, err = nkeys.CreateOperator(); err != nil {
		return nil, err
	}
	if a.System, err = nkeys.CreateAccount(); err != nil {
		return nil, err
	}
	if a.Account, err = nkeys.CreateAccount(); err != nil {
		return nil, err
	}
	if a.SigningKey, err = nkeys.CreateAccount(); err != nil {
		return nil, err
	}
	opub, _ := a.Operator.PublicKey()
	spub, _ := a.System.PublicKey()
	apub, _ := a.Account.PublicKey()
	kpub, _ := a.SigningKey.PublicKey()

	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "agentplane"
	oc.SystemAccount = spub
	if a.OperatorJWT, err = oc.Encode(a.Operator); err != nil {
		return nil, fmt.Errorf("sign the operator: %w", err)
	}
	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	if a.SystemJWT, err = sc.Encode(a.Operator); err != nil {
		return nil, fmt.Errorf("sign the system account: %w", err)
	}
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "AGENTPLANE"
	ac.SigningKeys.Add(kpub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit}
	if a.AccountJWT, err = ac.Encode(a.Operator); err != nil {
		return nil, fmt.Errorf("sign the platform account: %w", err)
	}
	return a, nil
}

// AccountPublicKey is the platform account's public key.
func (a *Authority) AccountPublicKey() string { pub, _ := a.Account.PublicKey(); return pub }

// SystemPublicKey is the system account's public key.
func (a *Authority) SystemPublicKey() string { pub, _ := a.System.PublicKey(); return pub }

// Issuer mints users of the platform account with its signing key.
func (a *Authority) Issuer() *Issuer {
	return &Issuer{account: a.AccountPublicKey(), signer: a.SigningKey}
}

// SigningSeed is the signing key's seed, the content of the Secret
// agent-controller mounts.
func (a *Authority) SigningSeed() ([]byte, error) { return a.SigningKey.Seed() }

// ServerConfig is the nats-server configuration that trusts the
// Authority: operator mode with an in-memory resolver preloaded with both
// accounts. It is merged with the server's other settings (listen, TLS,
// JetStream store).
func (a *Authority) ServerConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operator: %s\n", a.OperatorJWT)
	fmt.Fprintf(&b, "system_account: %s\n", a.SystemPublicKey())
	b.WriteString("resolver: MEMORY\nresolver_preload: {\n")
	fmt.Fprintf(&b, "  %s: %s\n", a.SystemPublicKey(), a.SystemJWT)
	fmt.Fprintf(&b, "  %s: %s\n", a.AccountPublicKey(), a.AccountJWT)
	b.WriteString("}\n")
	return b.String()
}

// Validate checks that the JWTs decode and chain: each account signed by
// the operator, the signing key listed in the platform account.
func (a *Authority) Validate() error {
	oc, err := jwt.DecodeOperatorClaims(a.OperatorJWT)
	if err != nil {
		return fmt.Errorf("operator jwt: %w", err)
	}
	for name, tok := range map[string]string{"system": a.SystemJWT, "platform": a.AccountJWT} {
		ac, err := jwt.DecodeAccountClaims(tok)
		if err != nil {
			return fmt.Errorf("%s account jwt: %w", name, err)
		}
		if ac.Issuer != oc.Subject {
			return fmt.Errorf("%s account jwt: not issued by the operator", name)
		}
	}
	ac, _ := jwt.DecodeAccountClaims(a.AccountJWT)
	kpub, _ := a.SigningKey.PublicKey()
	if !ac.SigningKeys.Contains(kpub) {
		return errors.New("the signing key is not one of the platform account's signing keys")
	}
	return nil
}
