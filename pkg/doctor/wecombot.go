package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"agent/pkg/admin"
)

// connectionCheck is the daemon's health check of the AI Bot connection
// (pkg/channel/wecombot).
const connectionCheck = "channel_wecom_bot_connection"

// checkWeComBot checks [wecom_bot] and asks the running daemon how its
// connection is. Doctor never dials WeCom itself: a bot keeps one live
// connection, and a second subscription would replace the daemon's.
func (e Env) checkWeComBot(ctx context.Context) Result {
	w := e.Config.WeComBot
	if f := e.Config.Fleet; f.Enabled && !f.Ingress {
		return Result{Level: OK, Detail: fmt.Sprintf("in a fleet: the ingress box holds the AI Bot connection; the bot's messages of users homed on %s are answered here through it", f.Box)}
	}
	if !w.Enabled {
		return Result{Level: OK, Detail: "disabled"}
	}
	var missing []string
	if w.BotID == "" {
		missing = append(missing, "wecom_bot.bot_id")
	}
	if w.Secret == "" {
		missing = append(missing, "wecom_bot.secret")
	}
	if len(missing) > 0 {
		return Result{Level: Fail, Detail: "missing " + strings.Join(missing, ", "), Fix: botFix}
	}
	st, err := admin.NewClient(e.Config.Server.AdminSocket).Status(ctx)
	if errors.Is(err, admin.ErrPermission) {
		return Result{Level: Warn, Detail: "cannot ask the daemon about the connection: " + err.Error(), Fix: "sudo agentctl doctor"}
	}
	if err != nil {
		return Result{Level: Warn, Detail: fmt.Sprintf("bot %s configured; the daemon is not running, so there is no connection to check (doctor does not dial WeCom: a second connection would replace the daemon's)", w.BotID),
			Fix: "systemctl start agent"}
	}
	for _, c := range st.Checks {
		if c.Name != connectionCheck {
			continue
		}
		switch {
		case c.Status == "ok":
			return Result{Level: OK, Detail: fmt.Sprintf("bot %s subscribed on %s", w.BotID, w.URL)}
		case strings.Contains(c.Detail, " is rejected "):
			return Result{Level: Fail, Detail: c.Detail, Fix: botFix}
		case strings.Contains(c.Detail, " is replaced "):
			return Result{Level: Fail, Detail: c.Detail + " (another box or program uses the same bot_id)",
				Fix: "stop the other connection, or give this box its own bot; the daemon retries every 10 minutes"}
		}
		return Result{Level: Warn, Detail: c.Detail, Fix: "check that this box reaches " + w.URL + " (outbound HTTPS/WebSocket); journalctl -u agent -g wecom_bot"}
	}
	return Result{Level: Warn, Detail: "the running daemon has no AI Bot connection (started before wecom_bot was enabled, or the channel failed to start)",
		Fix: "systemctl restart agent; journalctl -u agent -g wecom_bot"}
}

// botFix is where the bot's credentials come from.
const botFix = "WeCom admin console > 智能机器人 (AI Bot) > API mode with 长连接 (long connection): copy Bot ID and Secret into wecom_bot.bot_id and wecom_bot.secret_file"
