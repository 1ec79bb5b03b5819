package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/console"
)

// consoleRoutes registers the web console at / with its sign-in link at
// /console; its microphone and replies go through the channel that talks
// to the console (channel.Console: the voice channel's /voice).
func (d *Daemon) consoleRoutes(mux *http.ServeMux) {
	mux.Handle("GET /{$}", console.Handler())
	mux.Handle("GET "+console.SignInPath, d.sessions.SignIn())
}

// ConsoleLink implements admin.ConsoleBackend: a one-time sign-in link for
// the web console on this agent's listen address (a wildcard listener is
// reached on loopback).
func (d *Daemon) ConsoleLink(context.Context) (admin.ConsoleLink, error) {
	if d.sessions == nil {
		return admin.ConsoleLink{}, errors.New("console: the HTTP server is not running")
	}
	host, port, err := net.SplitHostPort(d.httpAddr)
	if err != nil {
		return admin.ConsoleLink{}, fmt.Errorf("console: listen address %q: %w", d.httpAddr, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	}
	l, err := d.sessions.NewLink("http://" + net.JoinHostPort(host, port))
	if err != nil {
		return admin.ConsoleLink{}, err
	}
	d.logger.Info("console sign-in link issued over the admin socket", "expires", l.Expires)
	return admin.ConsoleLink{URL: l.URL, ExpiresAt: l.Expires, Voice: len(d.consoleChannels()) > 0}, nil
}

// ConsoleEnd implements admin.ConsoleBackend: every console session ends
// and its voice connections close.
func (d *Daemon) ConsoleEnd(context.Context) (admin.ConsoleEnded, error) {
	if d.sessions == nil {
		return admin.ConsoleEnded{}, errors.New("console: the HTTP server is not running")
	}
	res := admin.ConsoleEnded{Sessions: d.sessions.EndAll()}
	seen := map[string]bool{}
	for _, c := range d.consoleChannels() {
		if p := c.ConsoleOperator(); !seen[p] {
			seen[p] = true
			res.Connections += d.channels.Disconnect(p)
		}
	}
	d.logger.Info("console sessions ended by the operator", "sessions", res.Sessions, "connections", res.Connections)
	return res, nil
}

// consoleChannels are the channels the web console talks through.
func (d *Daemon) consoleChannels() []channel.Console {
	var out []channel.Console
	for _, c := range d.channels.All() {
		if cc, ok := c.(channel.Console); ok {
			out = append(out, cc)
		}
	}
	return out
}
