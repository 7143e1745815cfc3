package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// FromCertificate is the identity a verified client certificate names: the
// tenant is the subject's organization (O), the client name its common
// name (CN), and the permissions its organizational units (OU) that name
// one ("create", "read", "admin"; other OUs are ignored). Only call it with
// a certificate whose chain the TLS handshake verified against the client
// CA.
func FromCertificate(c *x509.Certificate) (Identity, error) {
	if len(c.Subject.Organization) != 1 {
		return Identity{}, fmt.Errorf("client certificate %q: want exactly one O (the tenant), have %d", c.Subject.CommonName, len(c.Subject.Organization))
	}
	tenant := c.Subject.Organization[0]
	if err := ValidTenant(tenant); err != nil {
		return Identity{}, fmt.Errorf("client certificate %q: %w", c.Subject.CommonName, err)
	}
	var perms Permissions
	for _, ou := range c.Subject.OrganizationalUnit {
		if p, err := ParsePermissions([]string{ou}); err == nil {
			perms |= p
		}
	}
	if c.Subject.CommonName == "" {
		return Identity{}, errors.New("client certificate without a CN (the client name)")
	}
	return Identity{Tenant: tenant, Name: c.Subject.CommonName, Method: MethodClientCert, Permissions: perms}, nil
}
