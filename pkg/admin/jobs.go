package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Job is one scheduled job, for `agentctl jobs`.
type Job struct {
	ID         int64     `json:"id"`
	Owner      string    `json:"owner"`
	Channel    string    `json:"channel"`
	To         string    `json:"to"`
	Name       string    `json:"name,omitempty"`
	Kind       string    `json:"kind"` // cron | at
	Spec       string    `json:"spec"`
	TZ         string    `json:"tz"`
	Action     string    `json:"action"` // message | llm_task
	Payload    string    `json:"payload"`
	State      string    `json:"state"`
	Created    time.Time `json:"created"`
	Next       time.Time `json:"next,omitzero"`
	LastRun    time.Time `json:"last_run,omitzero"`
	LastStatus string    `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	Failures   int       `json:"failures"`
	Runs       int       `json:"runs"`
}

// JobSpec is a job to add: Cron or At; Text or Prompt. Owner is a user
// scope ("wecom:alice"); Channel and To default to the owner's.
type JobSpec struct {
	Owner   string `json:"owner"`
	Channel string `json:"channel,omitempty"`
	To      string `json:"to,omitempty"`
	Name    string `json:"name,omitempty"`
	Cron    string `json:"cron,omitempty"`
	At      string `json:"at,omitempty"`
	TZ      string `json:"tz,omitempty"`
	Text    string `json:"text,omitempty"`
	Prompt  string `json:"prompt,omitempty"`
}

// JobsBackend is the scheduler part of the admin API; a Backend that also
// implements it serves /v1/jobs.
type JobsBackend interface {
	JobsList(ctx context.Context) ([]Job, error)
	// JobsAdd returns ErrInvalidJob (wrapped) for a spec it refuses.
	JobsAdd(ctx context.Context, spec JobSpec) (Job, error)
	// JobsRemove returns ErrNotFound (wrapped) for an unknown id.
	JobsRemove(ctx context.Context, id int64) (Job, error)
}

// ErrInvalidJob is what a JobsBackend returns (wrapped) for a job it
// refuses; the API answers 422 with the reason.
var ErrInvalidJob = errors.New("invalid job")

// registerJobs adds GET/POST /v1/jobs and DELETE /v1/jobs/{id}; all answer
// 501 when b is not a JobsBackend.
func registerJobs(mux *http.ServeMux, b Backend) {
	jobs := optional[JobsBackend](b, "scheduler")
	mux.HandleFunc("GET /v1/jobs", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		list, err := j.JobsList(r.Context())
		if list == nil {
			list = []Job{}
		}
		answer(w, list, err)
	}))
	mux.HandleFunc("POST /v1/jobs", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		var spec JobSpec
		if decodeBody(w, r, &spec) {
			job, err := j.JobsAdd(r.Context(), spec)
			answer(w, job, err)
		}
	}))
	mux.HandleFunc("DELETE /v1/jobs/{id}", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		if id, ok := pathID(w, r); ok {
			job, err := j.JobsRemove(r.Context(), id)
			answer(w, job, err)
		}
	}))
}

// Jobs lists every scheduled job.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	return call[[]Job](ctx, c, http.MethodGet, "/v1/jobs", nil)
}

// AddJob schedules a job.
func (c *Client) AddJob(ctx context.Context, spec JobSpec) (Job, error) {
	return call[Job](ctx, c, http.MethodPost, "/v1/jobs", spec)
}

// RemoveJob deletes job id.
func (c *Client) RemoveJob(ctx context.Context, id int64) (Job, error) {
	return call[Job](ctx, c, http.MethodDelete, "/v1/jobs/"+strconv.FormatInt(id, 10), nil)
}
