package natsauth

import (
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Client is how one NATS client authenticates and verifies the server:
// a creds file (user JWT and seed), or its content, and TLS material,
// each a file mounted from a Secret. The zero value connects without
// either.
type Client struct {
	// CredsFile is the user's creds file; none when empty.
	CredsFile string
	// Creds is the content of a creds file, for a client that holds its
	// credential in memory rather than in a file another process of its
	// uid could read (a run's supervisor, docs/security.md); it wins over
	// CredsFile.
	Creds []byte
	// CAFile holds the CA certificates the server's certificate is checked
	// against; when set, the connection requires TLS.
	CAFile string
	// CertFile and KeyFile are a client certificate, for servers that
	// verify clients (both or neither).
	CertFile, KeyFile string
	// InboxPrefix replaces _INBOX for reply subjects; a run's credential
	// may subscribe only to its own (see InboxPrefix).
	InboxPrefix string
}

// Flags is the subset of a flag set Client registers its flags on.
type Flags interface {
	StringVar(p *string, name, def, usage string)
}

// AddFlags registers --nats-creds-file, --nats-ca-file, --nats-cert-file
// and --nats-key-file.
func (c *Client) AddFlags(fs Flags) {
	fs.StringVar(&c.CredsFile, "nats-creds-file", "", "NATS user credentials (a .creds file holding the user JWT and seed, mounted from a Secret); none when empty")
	fs.StringVar(&c.CAFile, "nats-ca-file", "", "CA certificates that verify the NATS server's certificate; when set the connection requires TLS")
	fs.StringVar(&c.CertFile, "nats-cert-file", "", "client certificate for NATS servers that verify clients (with --nats-key-file)")
	fs.StringVar(&c.KeyFile, "nats-key-file", "", "key of --nats-cert-file")
}

// Validate checks that every file named can be read and that a client
// certificate comes with its key.
func (c *Client) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("--nats-cert-file and --nats-key-file go together")
	}
	for flag, f := range map[string]string{"--nats-creds-file": c.CredsFile, "--nats-ca-file": c.CAFile, "--nats-cert-file": c.CertFile, "--nats-key-file": c.KeyFile} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	if c.CredsFile != "" {
		b, err := os.ReadFile(c.CredsFile)
		if err != nil {
			return fmt.Errorf("--nats-creds-file: %w", err)
		}
		if _, err := MsgIDKey(b); err != nil {
			return fmt.Errorf("--nats-creds-file: %w", err)
		}
	}
	return nil
}

// Options are the nats.go options that apply c. The creds file is read
// again on every (re)connect, so a rotated Secret takes effect without a
// restart; Creds are what they were at start.
func (c *Client) Options() []nats.Option {
	var o []nats.Option
	switch {
	case len(c.Creds) > 0:
		o = append(o, nats.UserCredentialBytes(c.Creds))
	case c.CredsFile != "":
		o = append(o, nats.UserCredentials(c.CredsFile))
	}
	if c.CAFile != "" {
		o = append(o, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		o = append(o, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	if c.InboxPrefix != "" {
		o = append(o, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return o
}

// MsgIDKey is the key of the credential (MsgIDKey), nil without one.
func (c *Client) MsgIDKey() ([]byte, error) {
	if len(c.Creds) > 0 {
		return MsgIDKey(c.Creds)
	}
	if c.CredsFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.CredsFile)
	if err != nil {
		return nil, fmt.Errorf("read nats creds: %w", err)
	}
	return MsgIDKey(b)
}
