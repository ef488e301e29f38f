package image

import (
	"strings"
	"testing"
	"time"
)

func TestMozillaBundleParsesAsCACertificates(t *testing.T) {
	pem, skipped := MozillaBundle()
	certs, err := ParseBundle(pem)
	if err != nil {
		t.Fatal(err)
	}
	// NSS has carried well over a hundred roots for years; far fewer means
	// the module's data was not read.
	if len(certs) < 100 {
		t.Fatalf("%d certificates, want at least 100", len(certs))
	}
	if skipped > 5 {
		t.Errorf("%d date-constrained roots left out; expected a handful at most", skipped)
	}
	for _, c := range certs {
		if !c.IsCA {
			t.Errorf("%s is not a CA certificate", c.Subject)
		}
	}
	if again, _ := MozillaBundle(); string(again) != string(pem) {
		t.Fatal("two calls gave different bundles")
	}
	// ISRG Root X1 (Let's Encrypt) must be there, or most of the web fails.
	found := false
	for _, c := range certs {
		if c.Subject.CommonName == "ISRG Root X1" && c.NotAfter.After(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
			found = true
		}
	}
	if !found {
		t.Error("ISRG Root X1 missing")
	}
}

func TestParseBundleRejectsWhatIsNotACertificate(t *testing.T) {
	good, _ := MozillaBundle()
	first := good[:strings.Index(string(good), "-----END CERTIFICATE-----")+len("-----END CERTIFICATE-----\n")]
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "no certificate"},
		{"html error page", "<html>503</html>", "not PEM"},
		{"a private key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "PRIVATE KEY"},
		{"garbage after the certificates", string(first) + "oops", "not PEM"},
		{"a broken certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "certificate 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBundle([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("one good certificate", func(t *testing.T) {
		if certs, err := ParseBundle(first); err != nil || len(certs) != 1 {
			t.Fatalf("%d certificates, %v", len(certs), err)
		}
	})
}
