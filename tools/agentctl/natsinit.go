package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/natsauth"
)

// defaultInstallNamespace is where the charts and deploy/ install
// agentplane (docs/install.md).
const defaultInstallNamespace = "agentplane-system"

// The Secrets `agentctl nats init` writes and the chart values that name
// them (docs/install.md, NATS authentication).
const (
	// natsAccountSecret holds the platform account's signing key (key
	// seed) and public key (key account); only agent-controller mounts it
	// (agent-controller's nats.accountSigningKeySecret).
	natsAccountSecret = "agentplane-nats-account"
	// natsControllerSecret and natsPollerSecret hold the services' own
	// credentials, key user.creds (each chart's nats.credentialsSecret).
	natsControllerSecret = "agentplane-nats-agent-controller"
	natsPollerSecret     = "agentplane-nats-batch-poller"
)

// natsFile is one file `agentctl nats init` writes.
type natsFile struct {
	name string
	mode fs.FileMode
	data []byte
	// goes says where the file goes, printed after it is written.
	goes string
}

func newNATSCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Set up NATS authentication for an install",
	}
	var out string
	var force bool
	initCmd := &cobra.Command{
		Use:   "init --out DIR",
		Short: "Generate the NATS trust chain, the services' credentials and their Secrets",
		Long: `Generate a new NATS trust chain (operator, system account, platform account
and its signing key) and write into DIR:

  nats-server.conf        the chain, for the NATS server's configuration
  secrets.yaml            the Secrets the charts mount (namespace: -n, default ` + defaultInstallNamespace + `)
  helm-values.yaml        the chart values that name those Secrets
  agent-controller.seed   the account's signing key (it mints each run's credential)
  account.pub             the account's public key
  agent-controller.creds  batch-poller.creds  agentctl.creds   service credentials

The seed and the .creds files are secrets (written 0600). Existing files are
never replaced without --force. docs/security.md describes the NATS boundary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exitCodeError{code: exitUsage, msg: "nats init: --out DIR is required"}
			}
			ns := g.namespace
			if ns == "" {
				ns = defaultInstallNamespace
			}
			files, err := natsInitFiles(ns)
			if err != nil {
				return err
			}
			if err := writeNATSFiles(out, files, force); err != nil {
				return err
			}
			printNATSFiles(cmd.OutOrStdout(), out, files)
			return nil
		},
	}
	initCmd.Flags().StringVar(&out, "out", "", "directory to write the files into (created when missing)")
	initCmd.Flags().BoolVar(&force, "force", false, "replace files that already exist")
	cmd.AddCommand(initCmd)
	return cmd
}

// natsInitFiles generates a trust chain and renders every file of it for
// an install in namespace ns.
func natsInitFiles(ns string) ([]natsFile, error) {
	a, err := natsauth.NewAuthority()
	if err != nil {
		return nil, fmt.Errorf("generate the NATS trust chain: %w", err)
	}
	seed, err := a.SigningSeed()
	if err != nil {
		return nil, err
	}
	account := a.AccountPublicKey()
	// Service credentials do not expire: they are replaced by running
	// init again, which also replaces the chain the server trusts.
	creds := map[string][]byte{}
	for _, name := range []string{"agent-controller", "batch-poller", "agentctl"} {
		if creds[name], err = a.Issuer().ServiceCredentials(name, time.Time{}); err != nil {
			return nil, fmt.Errorf("mint the %s credential: %w", name, err)
		}
	}
	secrets, err := natsSecrets(ns, map[string]map[string][]byte{
		// No trailing newline: agent-controller takes the account key
		// from an environment variable, as --nats-account.
		natsAccountSecret:    {"seed": seed, "account": []byte(account)},
		natsControllerSecret: {"user.creds": creds["agent-controller"]},
		natsPollerSecret:     {"user.creds": creds["batch-poller"]},
	})
	if err != nil {
		return nil, err
	}
	return []natsFile{
		{"nats-server.conf", 0o644, []byte(natsServerConfHeader + a.ServerConfig()),
			"the NATS server: include it in its configuration, with listen, JetStream and TLS settings"},
		{"secrets.yaml", 0o600, secrets,
			fmt.Sprintf("kubectl apply -f it: Secrets %s, %s and %s in namespace %s", natsAccountSecret, natsControllerSecret, natsPollerSecret, ns)},
		{"helm-values.yaml", 0o644, []byte(natsHelmValues),
			"helm upgrade --install helm/agentplane -f it, with --set global.natsUrl=..."},
		{"agent-controller.seed", 0o600, append(seed, '\n'),
			fmt.Sprintf("in Secret %s (key seed), mounted by agent-controller only; keep no other copy", natsAccountSecret)},
		{"account.pub", 0o644, []byte(account + "\n"),
			fmt.Sprintf("in Secret %s (key account); public", natsAccountSecret)},
		{"agent-controller.creds", 0o600, creds["agent-controller"],
			fmt.Sprintf("in Secret %s (key user.creds)", natsControllerSecret)},
		{"batch-poller.creds", 0o600, creds["batch-poller"],
			fmt.Sprintf("in Secret %s (key user.creds)", natsPollerSecret)},
		{"agentctl.creds", 0o600, creds["agentctl"],
			"yours: agentctl --nats-creds FILE (or NATS_CREDS=FILE)"},
	}, nil
}

// natsServerConfHeader starts nats-server.conf.
const natsServerConfHeader = `# The NATS trust chain of an agentplane install, written by agentctl nats init.
# Every client needs a credential this chain signed: the services' .creds
# files, and the per-run credentials agent-controller mints.
#
# It holds public material only (JWTs and public keys). Include it in the
# server's configuration (include ./nats-server.conf) and add the server's
# own settings, for example:
#
#   listen: 0.0.0.0:4222
#   jetstream { store_dir: /data/jetstream }
#   tls { cert_file: /etc/nats/tls/tls.crt, key_file: /etc/nats/tls/tls.key }
#
# JetStream must be on: run events are stored in the AGENT_EVENTS stream.
# With tls set, give the clients its CA (the charts' nats.caSecret,
# agentctl --nats-ca).

`

// natsHelmValues are the values of helm/agentplane that mount the Secrets
// of secrets.yaml.
var natsHelmValues = `# Values of helm/agentplane for the Secrets in secrets.yaml, written by
# agentctl nats init. Use with the NATS URL:
#
#   helm upgrade --install agentplane helm/agentplane -n NAMESPACE \
#     -f helm-values.yaml --set global.natsUrl=nats://nats.example.svc:4222
#
# With TLS, add --set global.nats.caSecret=SECRET (a Secret with key ca.crt).
agent-controller:
  nats:
    credentialsSecret: ` + natsControllerSecret + `
    accountSigningKeySecret: ` + natsAccountSecret + `
batch-poller:
  nats:
    credentialsSecret: ` + natsPollerSecret + `
`

// natsSecrets renders Secret manifests, one YAML document each, in name
// order.
func natsSecrets(ns string, secrets map[string]map[string][]byte) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# The NATS Secrets of agentplane, written by agentctl nats init: secret,\n# keep it out of version control.\n")
	for i, name := range []string{natsAccountSecret, natsControllerSecret, natsPollerSecret} {
		data := map[string]string{}
		for k, v := range secrets[name] {
			data[k] = base64.StdEncoding.EncodeToString(v)
		}
		doc, err := yaml.Marshal(map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata": map[string]any{
				"name":      name,
				"namespace": ns,
				"labels":    map[string]string{"app.kubernetes.io/part-of": "agentplane"},
			},
			"type": "Opaque",
			"data": data,
		})
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(doc)
	}
	return []byte(b.String()), nil
}

// writeNATSFiles writes files into dir. Without force it refuses, before
// writing anything, when one of them exists: replacing a trust chain
// locks out every client of the old one. Each file is written whole under
// a temporary name, then renamed, so its mode holds from the start.
func writeNATSFiles(dir string, files []natsFile, force bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("nats init: %w", err)
	}
	if !force {
		var existing []string
		for _, f := range files {
			p := filepath.Join(dir, f.name)
			if _, err := os.Lstat(p); err == nil {
				existing = append(existing, p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("nats init: %w", err)
			}
		}
		if len(existing) > 0 {
			return fmt.Errorf("nats init: %s already exist; nothing was written (--force replaces them with a new trust chain, which locks out every credential of the old one)",
				strings.Join(existing, ", "))
		}
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode, force); err != nil {
			return fmt.Errorf("nats init: %w", err)
		}
	}
	return nil
}

// writeFileAtomic writes data to path with mode; an existing path is
// replaced only with replace (a file created meanwhile is not).
func writeFileAtomic(path string, data []byte, mode fs.FileMode, replace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp.Name(), path)
	}
	// A hard link fails when path exists, where a rename would replace it.
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return nil
}

// printNATSFiles says where each written file goes; never its content.
func printNATSFiles(w io.Writer, dir string, files []natsFile) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range files {
		fmt.Fprintf(tw, "wrote %s\t%s\n", filepath.Join(dir, f.name), f.goes)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nNext: configure the NATS server with nats-server.conf, apply secrets.yaml, then install\nwith helm-values.yaml (docs/install.md, NATS authentication).\n")
}
