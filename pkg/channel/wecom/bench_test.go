package wecom

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"agent/pkg/store/storetest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// BenchmarkCallbackAck measures the acknowledgement latency of POST
// /wecom/callback over loopback HTTP (signature, timestamp, decryption,
// XML, the inbox INSERT on a WAL database) at a sustained 200 requests/s,
// open loop (request i leaves at start + i*5ms whatever the earlier ones
// do). b.N is the number of requests: run it with
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkCallbackAck -benchtime 2000x ./pkg/channel/wecom
//
// It reports p50_ms, p99_ms and max_ms, and fails if any request was not
// acknowledged or any acknowledged message is missing from the inbox.
func BenchmarkCallbackAck(b *testing.B) {
	const rate = 200
	r := newBenchRig(b)
	srv := httptest.NewServer(r.handler)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Prepare every request body up front: the client's crypto is not
	// what is measured.
	type prepared struct {
		q    string
		body []byte
	}
	reqs := make([]prepared, b.N)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	for i := range reqs {
		q, body, err := wecomtest.CallbackBody(r.crypto, text("user"+strconv.Itoa(i%50), "bench"+strconv.Itoa(i), "message number "+strconv.Itoa(i)), ts, strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = prepared{q.Encode(), body}
	}
	lat := make([]time.Duration, b.N)
	var failed sync.Map
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range reqs {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d) // pacing the load, not synchronisation
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t0 := time.Now()
			resp, err := client.Post(srv.URL+"/wecom/callback?"+reqs[i].q, "text/xml", bytes.NewReader(reqs[i].body))
			if err != nil {
				failed.Store(i, err.Error())
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			lat[i] = time.Since(t0)
			if resp.StatusCode != 200 || string(body) != "success" {
				failed.Store(i, fmt.Sprintf("%d %s", resp.StatusCode, body))
			}
		}(i)
	}
	wg.Wait()
	b.StopTimer()
	failed.Range(func(k, v any) bool {
		b.Errorf("request %v: %v", k, v)
		return false
	})
	var n int
	if err := r.db.QueryRow(`SELECT count(*) FROM inbox WHERE dedup_key LIKE 'msg:bench%'`).Scan(&n); err != nil || n != b.N {
		b.Fatalf("inbox holds %d of %d acknowledged messages (%v)", n, b.N, err)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "max_ms")
	b.ReportMetric(0, "ns/op")
}

// benchRig is a handler on a fresh database with the real clock.
type benchRig struct {
	db      *sql.DB
	crypto  *wx.Crypto
	handler *Handler
}

func newBenchRig(b *testing.B) *benchRig {
	b.Helper()
	st := storetest.Open(b)
	r := &benchRig{db: st.DB(), crypto: mustCrypto(b)}
	r.handler = &Handler{Crypto: r.crypto, Inbox: NewInbox(r.db, nil)}
	return r
}

// FuzzCallback feeds arbitrary queries and bodies to the handler, and
// arbitrary inner XML with a valid signature: it must never panic, answer
// 200 or 4xx, and store only well-formed known messages.
func FuzzCallback(f *testing.F) {
	crypto := mustCrypto(f)
	st := storetest.Open(f)
	h := &Handler{Crypto: crypto, Inbox: NewInbox(st.DB(), nil)}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	m := text("alice", "1", "hi")
	inner, _ := m.XML()
	q, body, _ := wecomtest.CallbackBody(crypto, m, ts, "n")
	f.Add(q.Encode(), body, inner, false)
	f.Add("", []byte("<xml><Encrypt>abc</Encrypt></xml>"), inner, true)
	f.Add("msg_signature=x", []byte("<!DOCTYPE x><xml/>"), []byte(`<xml><MsgType>event</MsgType><FromUserName>a</FromUserName></xml>`), true)
	f.Add("a=%zz", []byte{}, []byte(`<xml><MsgType>hologram</MsgType><FromUserName>a</FromUserName></xml>`), true)
	f.Fuzz(func(t *testing.T, rawQuery string, body, inner []byte, sign bool) {
		if sign {
			enc, sig, err := crypto.Encrypt(inner, ts, "n")
			if err != nil {
				return
			}
			env := []byte("<xml><ToUserName>x</ToUserName><Encrypt>" + enc + "</Encrypt><AgentID>1</AgentID></xml>")
			rawQuery = url.Values{"msg_signature": {sig}, "timestamp": {ts}, "nonce": {"n"}}.Encode()
			body = env
		}
		var before int
		st.DB().QueryRow(`SELECT count(*) FROM inbox`).Scan(&before)
		req := httptest.NewRequest(http.MethodPost, "/wecom/callback", bytes.NewReader(body))
		req.URL.RawQuery = rawQuery
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var after int
		st.DB().QueryRow(`SELECT count(*) FROM inbox`).Scan(&after)
		switch {
		case rec.Code == 200:
		case rec.Code >= 400 && rec.Code < 500:
			if after != before {
				t.Fatalf("refused with %d but stored", rec.Code)
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}
