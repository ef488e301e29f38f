package node

import (
	"testing"

	"k8s.io/client-go/rest"
)

func TestTheNodeAddressDefaultsToLoopbackAndMustBeAnIP(t *testing.T) {
	tests := []struct {
		name, address, want string
		wantErr             bool
	}{
		{name: "unset: loopback, where the pods are", address: "", want: "127.0.0.1"},
		{name: "an address another container reaches", address: "172.18.0.1", want: "172.18.0.1"},
		{name: "a name is refused: the InternalIP must be an address", address: "host.docker.internal", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{RESTConfig: &rest.Config{}, StateDir: t.TempDir(), Address: tt.address}
			err := c.defaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("defaults() = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && c.Address != tt.want {
				t.Errorf("Address = %q, want %q", c.Address, tt.want)
			}
		})
	}
}
