package assistant

import (
	"fmt"

	"agent/pkg/channel"
	"agent/pkg/conversation"
)

// Turns is the pipeline as channels see it (channel.Turns): never nil;
// while the pipeline is unavailable Handle refuses and Err says why.
func (a *Assistant) Turns() channel.Turns {
	var h conversation.Handler
	if a.conv != nil {
		h = a.conv
	}
	var cancel func(string)
	if a.runner != nil {
		cancel = a.runner.Cancel
	}
	return conversation.Turns(h, cancel, func() error {
		if a.err != nil {
			return fmt.Errorf("%w: %v", conversation.ErrUnavailable, a.err)
		}
		return nil
	})
}
