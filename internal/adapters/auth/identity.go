// Package auth establishes who is calling: a verified identity (tenant,
// client name, permissions) from a client certificate, an API key or a JWT.
// It never reads the tenant from a request message; the gRPC adapter
// (internal/adapters/grpcapi) asks it for the caller's Identity and decides with it.
//
// What a credential proves, and how each is checked, is in docs/security.md.
package auth

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Permissions is a set of what an identity may do.
type Permissions uint8

// The permissions. Create: CreateOrder (and its replays). Read: GetOrder,
// GetRequest, ListCustomerOrders. Admin: operator calls (requeue, verify).
const (
	Create Permissions = 1 << iota
	Read
	Admin
)

var permissionNames = []struct {
	p    Permissions
	name string
}{{Create, "create"}, {Read, "read"}, {Admin, "admin"}}

// ParsePermissions reads permission names ("create", "read", "admin").
func ParsePermissions(names []string) (Permissions, error) {
	var out Permissions
	for _, n := range names {
		found := false
		for _, pn := range permissionNames {
			if strings.EqualFold(strings.TrimSpace(n), pn.name) {
				out, found = out|pn.p, true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown permission %q (create, read or admin)", n)
		}
	}
	return out, nil
}

// Has reports whether every permission in want is in p.
func (p Permissions) Has(want Permissions) bool { return p&want == want }

// String is the comma-separated names, e.g. "create,read".
func (p Permissions) String() string {
	var names []string
	for _, pn := range permissionNames {
		if p.Has(pn.p) {
			names = append(names, pn.name)
		}
	}
	return strings.Join(names, ",")
}

// Method names how an identity was verified.
type Method string

const (
	MethodClientCert Method = "client-cert"
	MethodAPIKey     Method = "api-key"
	MethodJWT        Method = "jwt"
	// MethodNone: authentication is off (the explicit insecure mode).
	MethodNone Method = "none"
)

// Identity is a verified caller.
type Identity struct {
	// Tenant scopes everything the caller can create or see.
	Tenant string
	// Name is the client's name within its tenant (key name, certificate
	// CN, JWT subject): for logs, never for decisions.
	Name        string
	Method      Method
	Permissions Permissions
}

// tenantPattern bounds tenant names: they are part of every key and of the
// derived order id, and they appear as a metric label.
var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidTenant reports whether a tenant name can be used: 1-63 characters,
// lower-case letters, digits, '.', '_' and '-', starting with a letter or
// digit.
func ValidTenant(t string) error {
	if !tenantPattern.MatchString(t) {
		return fmt.Errorf("tenant %q: want 1-63 of a-z 0-9 . _ - (starting with a letter or digit)", t)
	}
	return nil
}

type ctxKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext is the identity NewContext stored, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}
