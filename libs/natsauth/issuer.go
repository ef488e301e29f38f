package natsauth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/agentplane/agentplane/libs/events"
)

// SinkSubjectPrefix is the first token of every subject a recipe's nats
// sink publishes on: agentplane.sinks.<namespace>.<subject>.
const SinkSubjectPrefix = "agentplane.sinks"

// Run names the run a credential is minted for.
type Run struct {
	// Namespace and Agent give the run's subjects.
	Namespace, Agent string
	// UID is the Agent's uid; it names the run's reply inbox.
	UID string
}

// EventSubjects is the filter of the run's event subjects,
// agents.<ns>.<agent>.>, as the events package spells it.
func (r Run) EventSubjects() string {
	return events.Filter{Namespace: r.Namespace, Agent: r.Agent}.Subject()
}

// SinkSubjects is the filter of the subjects the namespace's nats sinks
// publish on: agentplane.sinks.<ns>.>.
func (r Run) SinkSubjects() string { return SinkSubject(r.Namespace, ">") }

// SinkSubject is the subject a nats sink of namespace ns with the
// relative subject rel publishes on. The namespace is mapped to one
// subject token exactly as run event subjects map it.
func SinkSubject(ns, rel string) string {
	tok := strings.Split(events.Filter{Namespace: ns}.Subject(), ".")[1]
	return SinkSubjectPrefix + "." + tok + "." + rel
}

// InboxPrefix is the prefix of the run's reply subjects (JetStream
// acknowledgements); clients of the run must connect with
// nats.CustomInboxPrefix(InboxPrefix(uid)), as the credential lets them
// subscribe nowhere else.
func InboxPrefix(uid string) string {
	return "_INBOX_" + subjectSafe(uid)
}

// subjectSafe keeps the characters a subject token may hold; a uid is
// already made of them.
func subjectSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// Issuer mints user credentials of the platform account.
type Issuer struct {
	account string
	signer  nkeys.KeyPair
}

// NewIssuer returns an Issuer that signs with the account seed (an
// account's own seed, or one of its signing keys; then account is the
// account's public key, which may also be left empty for an own seed).
func NewIssuer(seed []byte, account string) (*Issuer, error) {
	kp, err := nkeys.FromSeed(trimSeed(seed))
	if err != nil {
		return nil, fmt.Errorf("nats account seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("nats account seed: %w", err)
	}
	if !nkeys.IsValidPublicAccountKey(pub) {
		return nil, errors.New("nats account seed: not an account key (a seed starting with SA)")
	}
	if account == "" {
		account = pub
	}
	if !nkeys.IsValidPublicAccountKey(account) {
		return nil, errors.New("nats account: not an account public key (starting with A)")
	}
	return &Issuer{account: account, signer: kp}, nil
}

// LoadIssuer reads the seed from seedFile; see NewIssuer.
func LoadIssuer(seedFile, account string) (*Issuer, error) {
	b, err := os.ReadFile(seedFile)
	if err != nil {
		return nil, fmt.Errorf("read the nats account seed: %w", err)
	}
	return NewIssuer(b, account)
}

func trimSeed(b []byte) []byte {
	if kp, err := jwt.ParseDecoratedNKey(b); err == nil {
		if seed, err := kp.Seed(); err == nil {
			return seed
		}
	}
	return []byte(strings.TrimSpace(string(b)))
}

// Account is the public key of the account the Issuer's users belong to.
func (i *Issuer) Account() string { return i.account }

// RunCredentials mints a creds file (user JWT and seed) for one run: it
// may publish only on the run's event subjects and its namespace's sink
// subjects, and subscribe only to its own inbox; it expires at expires
// (never when zero).
func (i *Issuer) RunCredentials(r Run, expires time.Time) ([]byte, error) {
	if r.Namespace == "" || r.Agent == "" || r.UID == "" {
		return nil, errors.New("nats run credential: namespace, agent and uid are all needed")
	}
	return i.mint("run "+r.Namespace+"/"+r.Agent, expires, func(p *jwt.Permissions) {
		p.Pub.Allow.Add(r.EventSubjects(), r.SinkSubjects())
		p.Sub.Allow.Add(InboxPrefix(r.UID) + ".>")
	})
}

// ServiceCredentials mints a creds file with the account's full rights,
// for a platform service (agent-controller, batch-poller) or an operator's
// agentctl.
func (i *Issuer) ServiceCredentials(name string, expires time.Time) ([]byte, error) {
	return i.mint(name, expires, nil)
}

func (i *Issuer) mint(name string, expires time.Time, scope func(*jwt.Permissions)) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, err := user.PublicKey()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	if signer, _ := i.signer.PublicKey(); signer != i.account {
		uc.IssuerAccount = i.account
	}
	if !expires.IsZero() {
		uc.Expires = expires.Unix()
	}
	if scope != nil {
		scope(&uc.Permissions)
	}
	token, err := uc.Encode(i.signer)
	if err != nil {
		return nil, fmt.Errorf("sign the nats user: %w", err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(token, seed)
}

// MsgIDKey derives, from a creds file, the key that makes a client's
// Nats-Msg-Id values unguessable (see events.PublisherOptions.MsgIDKey):
// JetStream de-duplicates by id across the whole stream, so ids another
// client can predict could be published first to get real events
// dropped. The key is stable for the credential, so a retry after a
// restart keeps its id.
func MsgIDKey(creds []byte) ([]byte, error) {
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	if err != nil {
		return nil, fmt.Errorf("nats creds: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("nats creds: %w", err)
	}
	sum := sha256.Sum256(append([]byte("agentplane nats msg-id\x00"), seed...))
	return sum[:], nil
}

// Describe names a creds file's user for logs: its name and public key,
// never the seed.
func Describe(creds []byte) string {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "unreadable creds"
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "unreadable creds"
	}
	return fmt.Sprintf("%s (%s…)", uc.Name, uc.Subject[:8])
}
