package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"agent/pkg/tools"
)

// Tool names.
const (
	ToolSchedule       = "schedule"
	ToolListSchedules  = "list_schedules"
	ToolRemoveSchedule = "remove_schedule"
)

type scheduleArgs struct {
	Cron    string `json:"cron,omitempty" desc:"recurring: 5-field cron (min hour day month weekday), e.g. \"30 8 * * *\"; or @daily, @weekly..."`
	At      string `json:"at,omitempty" desc:"once: ISO 8601 time, e.g. \"2025-03-01T08:00\""`
	TZ      string `json:"tz,omitempty" desc:"IANA time zone; default the assistant's"`
	Text    string `json:"text,omitempty" desc:"a reminder sent as is"`
	Prompt  string `json:"prompt,omitempty" desc:"or a task you carry out then; its answer is sent"`
	Name    string `json:"name,omitempty" desc:"a short name for the job"`
	Channel string `json:"channel,omitempty" desc:"default this conversation's"`
	To      string `json:"to,omitempty" desc:"default the person asking"`
}

type listArgs struct {
	All bool `json:"all,omitempty" desc:"owners only: list every user's jobs (owners see all by default)"`
}

type removeArgs struct {
	ID int64 `json:"id" desc:"the job number from list_schedules"`
}

// Tools returns schedule, list_schedules and remove_schedule. isOwner
// says whether a user scope ("wecom:alice") is one of agent.owners: owners
// see and remove every job, others only their own.
func (s *Scheduler) Tools(isOwner func(user string) bool) []tools.Tool {
	if isOwner == nil {
		isOwner = func(string) bool { return false }
	}
	return []tools.Tool{
		{
			Name:        ToolSchedule,
			Description: "Schedule a reminder (text) or a task (prompt), recurring (cron) or once (at).",
			Schema:      tools.SchemaFor[scheduleArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[scheduleArgs](call.Args)
				if err != nil {
					return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
				}
				owner, err := userOf(call)
				if err != nil {
					return "", err
				}
				n := NewJob{Owner: owner, Channel: a.Channel, To: a.To, Name: a.Name, Cron: a.Cron, At: a.At, TZ: a.TZ}
				if n.Channel == "" {
					n.Channel = call.Channel
				}
				if n.To == "" {
					n.To = call.User
				}
				switch {
				case strings.TrimSpace(a.Text) != "" && strings.TrimSpace(a.Prompt) != "":
					return "", fmt.Errorf("%w: give text or prompt, not both", tools.ErrBadArgs)
				case strings.TrimSpace(a.Prompt) != "":
					n.Action, n.Payload = ActionLLMTask, a.Prompt
				default:
					n.Action, n.Payload = ActionMessage, a.Text
				}
				j, err := s.Add(ctx, n)
				if errors.Is(err, ErrInvalid) {
					return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
				}
				if err != nil {
					return "", err
				}
				return "scheduled " + j.Describe(), nil
			},
		},
		{
			Name:        ToolListSchedules,
			Description: "List scheduled jobs (your own; the assistant's owners see everyone's) with their next run, last result and errors.",
			Schema:      tools.SchemaFor[listArgs](),
			ReadOnly:    true,
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				if _, err := tools.Decode[listArgs](call.Args); err != nil {
					return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
				}
				user, err := userOf(call)
				if err != nil {
					return "", err
				}
				owner := user
				if isOwner(user) {
					owner = ""
				}
				list, err := s.List(ctx, owner)
				if err != nil {
					return "", err
				}
				if len(list) == 0 {
					return "no scheduled jobs", nil
				}
				var b strings.Builder
				fmt.Fprintf(&b, "%d job(s), now %s:\n", len(list), s.clock.Now().In(s.c.Location).Format("2006-01-02 15:04 MST"))
				for _, j := range list {
					b.WriteString(j.Describe())
					b.WriteByte('\n')
				}
				return b.String(), nil
			},
		},
		{
			Name:        ToolRemoveSchedule,
			Description: "Remove a scheduled job by its number (see list_schedules). You can remove only your own jobs.",
			Schema:      tools.SchemaFor[removeArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[removeArgs](call.Args)
				if err != nil {
					return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
				}
				user, err := userOf(call)
				if err != nil {
					return "", err
				}
				owner := user
				if isOwner(user) {
					owner = ""
				}
				j, err := s.Remove(ctx, a.ID, owner)
				if errors.Is(err, ErrNotFound) {
					return "", fmt.Errorf("%w: no job #%d among your jobs (list_schedules shows them)", tools.ErrBadArgs, a.ID)
				}
				if err != nil {
					return "", err
				}
				return "removed " + j.Describe(), nil
			},
		},
	}
}

// userOf is the user scope of the person who made call.
func userOf(call tools.Call) (string, error) {
	if call.Channel == "" || call.User == "" {
		return "", errors.New("scheduling needs a known user and channel")
	}
	return call.Channel + ":" + call.User, nil
}

// ParseID reads "12" or "#12".
func ParseID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(s), "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job number", s)
	}
	return id, nil
}
