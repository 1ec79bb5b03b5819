// Package netguardtest is the SSRF guard's part of the shared test kit.
package netguardtest

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// Resolver answers name lookups from a map (name -> addresses), as
// netguard.Config.Resolver (the one fake resolver of the test kit): tests point public-looking names at local
// servers, or at the addresses an attacker would. An unknown name is
// "no such host".
type Resolver map[string][]string

// LookupNetIP implements netguard.Resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	list, ok := r[strings.TrimSuffix(strings.ToLower(host), ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(list))
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}
