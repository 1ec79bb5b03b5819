package wecombot

import (
	"agent/pkg/config"
	"agent/pkg/egress"
)

// Egress is what the AI Bot dials under cfg (channelhost.Builder.Egress):
// its endpoint on the box holding the connection, and for its media
// downloads any public https host (WeCom names them per message; netguard
// keeps them off private addresses) — in a fleet, on the box answering
// the message.
func Egress(cfg *config.Config) []egress.Rule {
	var rules []egress.Rule
	if cfg.WeComBot.Enabled && (!cfg.Fleet.Enabled || cfg.Fleet.Ingress) {
		if r, ok := egress.RuleFor(egress.WeComBot, cfg.WeComBot.URL); ok {
			rules = append(rules, r)
		}
	}
	if cfg.WeComBot.Enabled || (cfg.Fleet.Enabled && !cfg.Fleet.Ingress) {
		rules = append(rules, egress.Rule{Purpose: egress.WeComBot, Host: "*"})
	}
	return rules
}
