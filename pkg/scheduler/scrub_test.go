package scheduler

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"agent/pkg/logging"
)

// TestJobErrorIsScrubbed: an action fails with an error quoting a
// configured secret and a URL with an access_token. Neither is in the
// job's last_error, the run record, the give-up notice to the owner, or
// anywhere in the database file or its WAL.
func TestJobErrorIsScrubbed(t *testing.T) {
	const secret, token = "llm-Key-5e1f0a77", "WeComTok3n0123456789"
	sc := &logging.Scrubber{}
	sc.Set([]string{secret})
	h := newHarness(t, t0, func(c *Config) { c.MaxAttempts = 1; c.Scrub = sc.Scrub })
	path := h.st.Path()
	h.out.setFail(fmt.Errorf("llm said 401 for key %s: %w", secret,
		&url.Error{Op: "Post", URL: "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=" + token, Err: errors.New("EOF")}))
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "report"})
	h.clock.Set(j.Next)
	h.step()
	got := h.job(j.ID)
	if got.State != StateFailed || !strings.Contains(got.LastError, "access_token=***") || !strings.Contains(got.LastError, "key ***") {
		t.Fatalf("job: state %q last_error %q", got.State, got.LastError)
	}
	var runErr string
	if err := h.st.DB().QueryRow(`SELECT error FROM sched_runs WHERE job_id = ?`, j.ID).Scan(&runErr); err != nil {
		t.Fatal(err)
	}
	msgs := h.out.all()
	if len(msgs) != 1 {
		t.Fatalf("sent %+v; want the give-up notice", msgs)
	}
	for what, text := range map[string]string{"last_error": got.LastError, "run error": runErr, "notice": msgs[0].Text} {
		if strings.Contains(text, secret) || strings.Contains(text, token) {
			t.Errorf("%s holds a secret: %q", what, text)
		}
	}
	var raw []byte
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(token)) {
		t.Error("a secret is in the database files")
	}
	if !bytes.Contains(raw, []byte("access_token=***")) {
		t.Fatal("the scrubbed error is not in the files read; the check proves nothing")
	}
}

// TestJobErrorScrubbedByDefault: without a Scrub, the well-known shapes
// still go.
func TestJobErrorScrubbedByDefault(t *testing.T) {
	h := newHarness(t, t0, func(c *Config) { c.MaxAttempts = 1 })
	h.out.setFail(errors.New(`webhook: Post "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=abcdef-0123": EOF`))
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "report"})
	h.clock.Set(j.Next)
	h.step()
	if got := h.job(j.ID).LastError; strings.Contains(got, "abcdef-0123") || !strings.Contains(got, "key=***") {
		t.Fatalf("last_error %q", got)
	}
}

// TestOldJobErrorsRescrubbed: error texts an older release stored with a
// secret in them are scrubbed at the next start.
func TestOldJobErrorsRescrubbed(t *testing.T) {
	const secret = "llm-Key-5e1f0a77"
	sc := &logging.Scrubber{}
	sc.Set([]string{secret})
	h := newHarness(t, t0, func(c *Config) { c.Scrub = sc.Scrub })
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "report"})
	db := h.st.DB()
	if _, err := db.Exec(`UPDATE sched_jobs SET last_error = ? WHERE id = ?`, "401 for "+secret, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sched_runs(job_id, slot, started_at, status, error) VALUES (?, 5, 1, 'failed', ?)`,
		j.ID, "GET /x?access_token=Tok3nTok3n: EOF"); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if got := h.job(j.ID).LastError; got != "401 for ***" {
		t.Fatalf("last_error after restart %q", got)
	}
	var runErr string
	if err := db.QueryRow(`SELECT error FROM sched_runs WHERE job_id = ? AND slot = 5`, j.ID).Scan(&runErr); err != nil || runErr != "GET /x?access_token=***: EOF" {
		t.Fatalf("run error after restart %q %v", runErr, err)
	}
}
