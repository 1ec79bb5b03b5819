package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"agent/pkg/session"
	"agent/pkg/tools"
)

// Tool names.
const (
	ToolSearch  = "search_memory"
	ToolRecall  = "recall"
	ToolCorrect = "correct_memory"
	ToolForget  = "forget_memory"
)

type searchArgs struct {
	Query string `json:"query" desc:"what to look for, in the user's words"`
	TopK  int    `json:"top_k,omitempty" desc:"how many facts to return (default 5, at most 20)"`
}

type recallArgs struct {
	Topic  string `json:"topic,omitempty" desc:"facts whose topic contains this"`
	Person string `json:"person,omitempty" desc:"facts that involve this person"`
	From   string `json:"from,omitempty" desc:"facts about or stored at this time or later: YYYY-MM-DD or RFC 3339"`
	To     string `json:"to,omitempty" desc:"facts before this time: YYYY-MM-DD (exclusive) or RFC 3339"`
	Limit  int    `json:"limit,omitempty" desc:"at most this many facts (default 20, at most 50)"`
}

type correctArgs struct {
	ID   int64  `json:"id" desc:"the fact's id, as shown with # in memory"`
	Fact string `json:"fact" desc:"the corrected fact, one self-contained sentence"`
}

type forgetArgs struct {
	ID int64 `json:"id" desc:"the fact's id, as shown with # in memory"`
}

// scopeOf is the memory scope of the conversation that made call.
func scopeOf(call tools.Call) (string, error) {
	if call.Session != "" {
		return session.Key(call.Session).MemoryScope()
	}
	if call.User == "" {
		return "", errors.New("memory is not available in this conversation (no user)")
	}
	return call.Channel + ":" + call.User, nil
}

// Tools returns the memory tools: search_memory, recall, correct_memory and
// forget_memory. Each works on the calling conversation's scope only.
func (s *Store) Tools() []tools.Tool {
	return []tools.Tool{
		{
			Name:        ToolSearch,
			Description: "Search your long-term memory about this user (or this group) for facts relevant to a query. Returns dated facts with their ids.",
			Schema:      tools.SchemaFor[searchArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[searchArgs](call.Args)
				if err != nil {
					return "", err
				}
				scope, err := scopeOf(call)
				if err != nil {
					return "", err
				}
				if strings.TrimSpace(a.Query) == "" {
					return "", fmt.Errorf("%w: query must not be empty", tools.ErrBadArgs)
				}
				k := a.TopK
				if k <= 0 {
					k = s.cfg.TopK
				}
				hits, err := s.Search(ctx, scope, a.Query, min(k, 20))
				if err != nil {
					return "", err
				}
				if len(hits) == 0 {
					return "No remembered facts match.", nil
				}
				return Format(hits, s.cfg.Location), nil
			},
		},
		{
			Name:        ToolRecall,
			Description: "List remembered facts about this user (or group) by topic, person or time range, newest first.",
			Schema:      tools.SchemaFor[recallArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[recallArgs](call.Args)
				if err != nil {
					return "", err
				}
				scope, err := scopeOf(call)
				if err != nil {
					return "", err
				}
				f := Filter{Scope: scope, Topic: strings.TrimSpace(a.Topic), Person: strings.TrimSpace(a.Person), Limit: 20}
				if a.Limit > 0 {
					f.Limit = min(a.Limit, 50)
				}
				if f.From, err = s.toolTime("from", a.From); err != nil {
					return "", err
				}
				if f.To, err = s.toolTime("to", a.To); err != nil {
					return "", err
				}
				if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
					return "", fmt.Errorf("%w: from must be before to", tools.ErrBadArgs)
				}
				facts, err := s.List(ctx, f)
				if err != nil {
					return "", err
				}
				if len(facts) == 0 {
					return "No remembered facts match.", nil
				}
				hits := make([]Hit, len(facts))
				for i, fact := range facts {
					hits[i] = Hit{Fact: fact}
				}
				return Format(hits, s.cfg.Location), nil
			},
		},
		{
			Name: ToolCorrect,
			Description: "Correct a remembered fact that is wrong or out of date (the user moved, changed a preference, a plan changed). " +
				"The old version is kept as history and no longer recalled.",
			Schema: tools.SchemaFor[correctArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[correctArgs](call.Args)
				if err != nil {
					return "", err
				}
				scope, err := scopeOf(call)
				if err != nil {
					return "", err
				}
				res, err := s.Correct(ctx, scope, a.ID, a.Fact, "tool")
				if err != nil {
					return "", toolError(err)
				}
				return fmt.Sprintf("Fact #%d corrected; the corrected fact is #%d.", a.ID, res.ID), nil
			},
		},
		{
			Name:        ToolForget,
			Description: "Forget a remembered fact (with its history) when the user asks you to, or when it is plainly wrong and cannot be corrected.",
			Schema:      tools.SchemaFor[forgetArgs](),
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				a, err := tools.Decode[forgetArgs](call.Args)
				if err != nil {
					return "", err
				}
				scope, err := scopeOf(call)
				if err != nil {
					return "", err
				}
				f, err := s.Forget(ctx, scope, a.ID)
				if err != nil {
					return "", toolError(err)
				}
				return fmt.Sprintf("Forgotten: #%d %s", f.ID, f.Text), nil
			},
		},
	}
}

// toolError turns store errors into what the model can act on.
func toolError(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %v (use search_memory to find the current id)", tools.ErrBadArgs, err)
	case errors.Is(err, ErrInvalid):
		return fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
	}
	return err
}

func (s *Store) toolTime(name, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	t := parseTime(v, s.cfg.Location)
	if t.IsZero() {
		return t, fmt.Errorf("%w: %s %q is not a date (YYYY-MM-DD) or RFC 3339 time", tools.ErrBadArgs, name, v)
	}
	return t, nil
}
