package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
	jb, _ := b.(JobsBackend)
	jobs := func(h func(w http.ResponseWriter, r *http.Request, j JobsBackend)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if jb == nil {
				writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this daemon has no scheduler"})
				return
			}
			h(w, r, jb)
		}
	}
	mux.HandleFunc("GET /v1/jobs", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		list, err := j.JobsList(r.Context())
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		if list == nil {
			list = []Job{}
		}
		writeJSON(w, http.StatusOK, list)
	}))
	mux.HandleFunc("POST /v1/jobs", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		var spec JobSpec
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&spec); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
			return
		}
		job, err := j.JobsAdd(r.Context(), spec)
		switch {
		case errors.Is(err, ErrInvalidJob):
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, job)
		}
	}))
	mux.HandleFunc("DELETE /v1/jobs/{id}", jobs(func(w http.ResponseWriter, r *http.Request, j JobsBackend) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the id must be a positive number"})
			return
		}
		job, err := j.JobsRemove(r.Context(), id)
		switch {
		case errors.Is(err, ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, job)
		}
	}))
}

// Jobs lists every scheduled job.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var list []Job
	err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &list)
	return list, err
}

// AddJob schedules a job.
func (c *Client) AddJob(ctx context.Context, spec JobSpec) (Job, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var j Job
	err := c.do(ctx, http.MethodPost, "/v1/jobs", spec, &j)
	return j, err
}

// RemoveJob deletes job id.
func (c *Client) RemoveJob(ctx context.Context, id int64) (Job, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var j Job
	err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+strconv.FormatInt(id, 10), nil, &j)
	return j, err
}
