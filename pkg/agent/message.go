package agent

import (
	"context"
	"fmt"
	"strings"

	"agent/pkg/recipient"
	"agent/pkg/tools"
)

// messageArgs are the arguments of the message tool.
type messageArgs struct {
	Channel string `json:"channel,omitempty" desc:"channel to send on, e.g. wecom; empty = the current conversation's channel"`
	To      string `json:"to" desc:"recipient user id on that channel"`
	Text    string `json:"text" desc:"the message text"`
}

// maxMessageText bounds one message sent by the tool.
const maxMessageText = 8 << 10

// MessageTool returns the message tool: send text to a user on a channel.
// policy decides whom the caller may address (recipient.Policy: themselves
// and their conversation; owners any single user); send delivers it (the
// outbox); its error goes back to the model. An empty channel means the
// channel of the conversation that called the tool.
func MessageTool(policy recipient.Policy, send func(ctx context.Context, channel, to, text string) error) tools.Tool {
	return tools.Tool{
		Name:        "message",
		Description: "Send a text message on a channel: to the person you are talking to, or (for the assistant's owners only) to another single user. Messages to everyone or to lists are refused. Returns once the message is queued for delivery.",
		Schema:      tools.SchemaFor[messageArgs](),
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			args, err := tools.Decode[messageArgs](call.Args)
			if err != nil {
				return "", err
			}
			channel := strings.TrimSpace(args.Channel)
			if channel == "" {
				channel = call.Channel
			}
			to := strings.TrimSpace(args.To)
			switch {
			case channel == "":
				return "", fmt.Errorf("%w: channel is required here", tools.ErrBadArgs)
			case to == "":
				return "", fmt.Errorf("%w: to must name the recipient", tools.ErrBadArgs)
			case strings.TrimSpace(args.Text) == "":
				return "", fmt.Errorf("%w: text must not be empty", tools.ErrBadArgs)
			case len(args.Text) > maxMessageText:
				return "", fmt.Errorf("%w: text is %d bytes, at most %d allowed; split it", tools.ErrBadArgs, len(args.Text), maxMessageText)
			}
			to, err = policy.Check(recipient.Caller{Channel: call.Channel, User: call.User, Session: call.Session}, channel, to)
			if err != nil {
				return "", fmt.Errorf("message not sent: %w", err)
			}
			if err := send(ctx, channel, to, args.Text); err != nil {
				return "", fmt.Errorf("message to %s on %s not sent: %w", to, channel, err)
			}
			return fmt.Sprintf("message queued for %s on %s", to, channel), nil
		},
	}
}
