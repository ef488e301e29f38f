package controlplane

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestServingCertificateCoversEveryNameTheAPIServerIsReachedBy(t *testing.T) {
	dir := t.TempDir()
	if _, err := WritePKI(dir, "apiserver", "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ServingCertFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, host string
	}{
		{"loopback by name", "localhost"},
		{"loopback by address", "127.0.0.1"},
		{"in-cluster Service name", "kubernetes.default.svc"},
		{"in-cluster Service address", ServiceClusterIP},
		{"an extra name: a container's alias", "apiserver"},
		{"an extra address", "192.0.2.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := cert.VerifyHostname(tt.host); err != nil {
				t.Errorf("the serving certificate does not cover %s: %v", tt.host, err)
			}
		})
	}
	if ip := net.ParseIP("192.0.2.8"); slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
		t.Errorf("the serving certificate covers an address nobody asked for")
	}
}

func TestEtcdListensWhereItAnnouncesUnlessToldOtherwise(t *testing.T) {
	tests := []struct {
		name string
		etcd Etcd
		want []string
	}{
		{
			name: "loopback: listens on the announced URLs",
			etcd: Etcd{Name: "e", DataDir: "/d", ClientURL: "http://127.0.0.1:2379", PeerURL: "http://127.0.0.1:2380"},
			want: []string{"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379", "--listen-peer-urls=http://127.0.0.1:2380"},
		},
		{
			name: "container: announces its name, listens on every address",
			etcd: Etcd{Name: "e", DataDir: "/d", ClientURL: "http://etcd:2379", PeerURL: "http://etcd:2380",
				ListenClientURL: "http://0.0.0.0:2379", ListenPeerURL: "http://0.0.0.0:2380"},
			want: []string{"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://etcd:2379", "--listen-peer-urls=http://0.0.0.0:2380", "--initial-cluster=e=http://etcd:2380"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.etcd.Args()
			for _, w := range tt.want {
				if !slices.Contains(args, w) {
					t.Errorf("args %q lack %q", args, w)
				}
			}
		})
	}
}
