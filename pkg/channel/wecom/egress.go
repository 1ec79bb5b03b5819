package wecom

import (
	"agent/pkg/config"
	"agent/pkg/egress"
)

// Egress is the host the app channel dials under cfg: WeCom's API
// (channelhost.Builder.Egress).
func Egress(cfg *config.Config) []egress.Rule {
	if !cfg.WeCom.Enabled {
		return nil
	}
	if r, ok := egress.RuleFor(egress.WeCom, cfg.WeCom.APIBase); ok {
		return []egress.Rule{r}
	}
	return nil
}
