// Package clientcreds gives orderd's command-line clients (orderctl,
// orderload, orderbench) the same credential flags; the credentials
// themselves are the client library's (client.Credentials), so a client
// team and our tools dial orderd the same way.
package clientcreds

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/atlasmart/orderd/proto/client"
)

// Options say how to reach orderd.
type Options = client.Credentials

// Bearer sends a token as "authorization: Bearer <token>".
type Bearer = client.Bearer

// Flags registers -ca-file, -cert-file, -key-file, -token-file and
// -plaintext on fs, into o and tokenFile. The token is read from
// ORDERD_API_KEY when no -token-file is given, never from a flag (flags
// show in ps).
func Flags(fs *flag.FlagSet, o *Options, tokenFile *string) {
	fs.StringVar(&o.CAFile, "ca-file", os.Getenv("ORDERD_CA_FILE"), "PEM CA that signed orderd's certificate (default: system roots)")
	fs.StringVar(&o.CertFile, "cert-file", os.Getenv("ORDERD_CLIENT_CERT_FILE"), "PEM client certificate (mutual TLS identity)")
	fs.StringVar(&o.KeyFile, "key-file", os.Getenv("ORDERD_CLIENT_KEY_FILE"), "PEM key of -cert-file")
	fs.StringVar(tokenFile, "token-file", "", "file holding an API key or JWT (default: $ORDERD_API_KEY)")
	fs.BoolVar(&o.Plaintext, "plaintext", false, "no TLS, no credentials (orderd -insecure without a certificate)")
}

// ReadToken fills o.Token from file, or from ORDERD_API_KEY when file is "".
func ReadToken(o *Options, file string) error {
	if file == "" {
		o.Token = os.Getenv("ORDERD_API_KEY")
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	o.Token = strings.TrimSpace(string(b))
	return nil
}
