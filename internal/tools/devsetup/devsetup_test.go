package devsetup

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// The server certificate names the loopback addresses and localhost, and
// the extra hosts given: orderd serving on another address needs it there.
func TestServerCertificateNamesExtraHosts(t *testing.T) {
	f, _, err := Write(t.TempDir(), "default", time.Hour, "127.0.0.25", "orderd.test")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(f.ServerCert())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "127.0.0.25"} {
		if !slices.ContainsFunc(cert.IPAddresses, net.ParseIP(ip).Equal) {
			t.Errorf("server certificate lacks %s (has %v)", ip, cert.IPAddresses)
		}
	}
	for _, name := range []string{"localhost", "orderd.test"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("server certificate: %v", err)
		}
	}
}
