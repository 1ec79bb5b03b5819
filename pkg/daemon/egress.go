package daemon

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"agent/pkg/config"
	"agent/pkg/egress"
)

// The egress ledger (pkg/egress): every outbound connection of the daemon
// goes through it. Its rules are privacy.egress_allow, or, when that is
// empty, what the configuration itself names: the model's host; the hosts
// each enabled channel dials (channelhost.Builder.Egress); the fleet's NATS
// servers; the hosts of HTTP MCP servers; and, for web_search and
// web_fetch, any host (the tools' purpose; web_fetch's guard keeps them
// public). A reload applies the new rules to the next connection.

// egressRules are the rules cfg puts in force.
func (d *Daemon) egressRules(cfg *config.Config) []egress.Rule {
	if len(cfg.Privacy.EgressAllow) > 0 {
		rules, _ := egress.ParseRules(cfg.Privacy.EgressAllow) // validated at load
		return rules
	}
	var rules []egress.Rule
	add := func(p egress.Purpose, rawURL string) {
		if r, ok := egress.RuleFor(p, rawURL); ok && !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	any := func(p egress.Purpose) { rules = append(rules, egress.Rule{Purpose: p, Host: "*"}) }
	add(egress.LLM, cfg.LLM.BaseURL)
	for _, b := range d.opts.Channels {
		if b.Egress != nil {
			for _, r := range b.Egress(cfg) {
				if !slices.Contains(rules, r) {
					rules = append(rules, r)
				}
			}
		}
	}
	if cfg.Fleet.Enabled {
		for _, u := range strings.Split(cfg.Fleet.NATSURL, ",") {
			add(egress.Fleet, strings.TrimSpace(u))
		}
	}
	for _, s := range cfg.MCPServers {
		if strings.EqualFold(s.Transport, "http") || s.URL != "" {
			add(egress.MCP, s.URL)
		}
	}
	any(egress.Web)
	return rules
}

// startEgress makes the ledger and keeps its counts until ctx ends.
func (d *Daemon) startEgress(ctx context.Context, cfg *config.Config, resolver egress.Resolver) {
	d.egress = egress.New(egress.Config{Clock: d.clock, Logger: d.logger.With("component", "egress"), Metrics: d.metrics, Resolver: resolver,
		Proxy: http.ProxyFromEnvironment}) // an office proxy: the target is still checked
	d.egress.Open(d.store.DB())
	d.egress.SetRules(d.egressRules(cfg))
	go d.egress.Run(ctx)
}
