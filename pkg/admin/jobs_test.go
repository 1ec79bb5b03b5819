package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type jobsBackend struct {
	fakeBackend
	jobs []Job
}

func (b *jobsBackend) JobsList(context.Context) ([]Job, error) { return b.jobs, nil }
func (b *jobsBackend) JobsAdd(_ context.Context, s JobSpec) (Job, error) {
	if s.Cron == "bad" {
		return Job{}, fmt.Errorf("%w: cron expression %q: expected 5 fields", ErrInvalidJob, s.Cron)
	}
	j := Job{ID: int64(len(b.jobs) + 1), Owner: s.Owner, Kind: "cron", Spec: s.Cron, Payload: s.Text}
	b.jobs = append(b.jobs, j)
	return j, nil
}
func (b *jobsBackend) JobsRemove(_ context.Context, id int64) (Job, error) {
	for i, j := range b.jobs {
		if j.ID == id {
			b.jobs = append(b.jobs[:i], b.jobs[i+1:]...)
			return j, nil
		}
	}
	return Job{}, fmt.Errorf("%w: job #%d", ErrNotFound, id)
}

func TestJobsAPI(t *testing.T) {
	srv := httptest.NewServer(Handler(fakeBackend{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/jobs")
	if err != nil || resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("without a scheduler: %v %v", resp.Status, err)
	}
	resp.Body.Close()

	b := &jobsBackend{}
	srv2 := httptest.NewServer(Handler(b))
	defer srv2.Close()
	resp, err = http.Post(srv2.URL+"/v1/jobs", "application/json", strings.NewReader(`{"owner":"wecom:a","cron":"bad","text":"x"}`))
	if err != nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("invalid job: %v %v; want 422", resp.Status, err)
	}
	resp.Body.Close()
	resp, err = http.Post(srv2.URL+"/v1/jobs", "application/json", strings.NewReader(`{"owner":"wecom:a","cron":"0 9 * * *","text":"x"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("add: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodDelete, srv2.URL+"/v1/jobs/9", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("remove unknown: %v %v; want 404", resp.Status, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodDelete, srv2.URL+"/v1/jobs/1", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("remove: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	if len(b.jobs) != 0 {
		t.Fatalf("jobs left: %v", b.jobs)
	}
}
