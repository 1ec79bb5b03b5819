package adminsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/console"
)

// Console is agentctl console (admin.ConsoleBackend): one-time sign-in
// links for the web console, and ending every session.
type Console struct {
	Sessions *console.Sessions // nil: the HTTP server is not running
	Listen   string            // server.listen's bound address
	// Channels are the enabled channels: those the console talks through
	// (channel.Console) and whose connections close with its sessions.
	Channels *channel.Set
	Logger   *slog.Logger
}

var _ admin.ConsoleBackend = Console{}

// ConsoleLink implements admin.ConsoleBackend: a one-time sign-in link for
// the web console on this agent's listen address (a wildcard listener is
// reached on loopback).
func (c Console) ConsoleLink(context.Context) (admin.ConsoleLink, error) {
	if c.Sessions == nil {
		return admin.ConsoleLink{}, errors.New("console: the HTTP server is not running")
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return admin.ConsoleLink{}, fmt.Errorf("console: listen address %q: %w", c.Listen, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	}
	l, err := c.Sessions.NewLink("http://" + net.JoinHostPort(host, port))
	if err != nil {
		return admin.ConsoleLink{}, err
	}
	c.Logger.Info("console sign-in link issued over the admin socket", "expires", l.Expires)
	return admin.ConsoleLink{URL: l.URL, ExpiresAt: l.Expires, Voice: len(c.channels()) > 0}, nil
}

// ConsoleEnd implements admin.ConsoleBackend: every console session ends
// and the connections it made through its channels close.
func (c Console) ConsoleEnd(context.Context) (admin.ConsoleEnded, error) {
	if c.Sessions == nil {
		return admin.ConsoleEnded{}, errors.New("console: the HTTP server is not running")
	}
	res := admin.ConsoleEnded{Sessions: c.Sessions.EndAll()}
	seen := map[string]bool{}
	for _, cc := range c.channels() {
		if p := cc.ConsoleOperator(); !seen[p] {
			seen[p] = true
			res.Connections += c.Channels.Disconnect(p)
		}
	}
	c.Logger.Info("console sessions ended by the operator", "sessions", res.Sessions, "connections", res.Connections)
	return res, nil
}

// channels are the channels the web console talks through.
func (c Console) channels() []channel.Console {
	if c.Channels == nil {
		return nil
	}
	var out []channel.Console
	for _, ch := range c.Channels.All() {
		if cc, ok := ch.(channel.Console); ok {
			out = append(out, cc)
		}
	}
	return out
}
