package doctor

import (
	"context"
	"fmt"
	"net"
	"strings"

	"agent/pkg/hostguard"
)

// checkAccess reports who can reach the HTTP listener and the voice
// channel: the Host names it answers (hostguard), whether devices have a
// token, and the setups that refuse what the operator probably wants.
func (e Env) checkAccess(context.Context) Result {
	c := e.Config
	s := c.Server
	names := hostguard.Policy{Listen: s.Listen, Allowed: s.AllowedHosts}.Names()
	var warns, fixes []string
	if c.Voice.Enabled && c.Voice.Token == "" {
		warns = append(warns, "voice.token is empty: no device can connect, only the web console signed in with `agentctl console`")
		fixes = append(fixes, "put VOICE_TOKEN=<long random> in /etc/agent/agent.env (scripts/install.sh generates one), then systemctl restart agent")
	}
	for _, o := range c.Agent.Owners {
		if strings.HasPrefix(o, "voice:") {
			warns = append(warns, "agent.owners lists "+o+": voice names are claims anyone holding voice.token can make, so the voice channel refuses owner names")
			fixes = append(fixes, "take "+o+" out of agent.owners; the operator talks through the web console (agentctl console)")
			break
		}
	}
	if c.WeCom.Enabled && len(s.AllowedHosts) == 0 && c.ListenIsLoopback() {
		warns = append(warns, "wecom is enabled on a loopback listener: its callbacks come through a proxy or tunnel with your public host name in Host, which gets 421 until server.allowed_hosts lists it")
		fixes = append(fixes, `set server.allowed_hosts = ["<public host name>"], then agentctl reload`)
	}
	if host, _, err := net.SplitHostPort(s.Listen); err == nil && (host == "" || host == "0.0.0.0" || host == "::") && len(s.AllowedHosts) == 0 {
		warns = append(warns, "server.listen "+s.Listen+" takes every interface but only loopback Host names are answered: devices that reach the agent by a LAN address or name get 421")
		fixes = append(fixes, `list those names or addresses in server.allowed_hosts, e.g. ["192.168.1.20", "agent.lan"]`)
	}
	if len(warns) > 0 {
		return Result{Level: Warn, Detail: strings.Join(warns, "; "), Fix: strings.Join(fixes, "; ")}
	}
	served := "loopback"
	if len(names) > 0 {
		served += ", " + strings.Join(names, ", ")
	}
	voice := "voice disabled"
	if c.Voice.Enabled {
		voice = "voice devices need voice.token"
	}
	return Result{Level: OK, Detail: fmt.Sprintf("Host names answered: %s; %s; the web console signs in with agentctl console", served, voice)}
}
