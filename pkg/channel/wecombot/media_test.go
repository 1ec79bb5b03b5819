package wecombot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/channel/upload"
	"agent/pkg/clock"
	"agent/pkg/netguard"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// testFetcher fetches for a connection to botURL (the test endpoint's
// opens its own loopback address).
func testFetcher(t *testing.T, botURL string) *fetcher {
	return newFetcher(filepath.Join(t.TempDir(), "spool"), botURL, nil, clock.Real(), slog.New(slog.DiscardHandler))
}

// A resource is downloaded when its message is stored: its turn reads it
// from the spool after WeCom's URL has expired, and the spool holds it
// encrypted.
func TestMediaSpoolOutlivesTheURL(t *testing.T) {
	srv := aibottest.New(t)
	f := testFetcher(t, srv.URL())
	plain := []byte("quarterly figures")
	u, k := srv.Serve(plain, "figures.txt")
	ref := mediaRef{Kind: upload.File, URL: u, Key: k}
	ctx := context.Background()
	f.start(ctx, "m1", []mediaRef{ref})
	f.wait(ctx, "m1")
	srv.Expire(u, http.StatusForbidden)
	got, name, err := f.get(ctx, "m1", 0, ref)
	if err != nil || !bytes.Equal(got, plain) || name != "figures.txt" {
		t.Fatalf("get = %q, %q, %v", got, name, err)
	}
	raw, err := os.ReadFile(f.spoolPath("m1", 0))
	if err != nil || bytes.Contains(raw, plain) {
		t.Fatalf("spool entry: %v (plain text stored: %v)", err, bytes.Contains(raw, plain))
	}
	if n := srv.Downloads(u); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
	f.drop("m1", 1)
	if ents, _ := os.ReadDir(f.dir); len(ents) != 0 {
		t.Fatalf("drop left %d entries", len(ents))
	}
	// Gone from the spool and expired: a clear error, nothing stored.
	if _, _, err := f.get(ctx, "m1", 0, ref); !errors.Is(err, errNotFetched) {
		t.Fatalf("expired and not spooled: %v", err)
	}
}

// What WeCom's URL names (or redirects to) cannot make the box fetch from
// itself or its LAN, or over plain http, unless the connection itself is
// on loopback (tests).
func TestMediaRefusesLocalAddresses(t *testing.T) {
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("secret")) }))
	defer tls.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("secret")) }))
	defer plain.Close()
	f := testFetcher(t, aibot.DefaultURL)
	f.client.Transport.(*http.Transport).TLSClientConfig = tls.Client().Transport.(*http.Transport).TLSClientConfig
	ctx := context.Background()
	for _, u := range []string{tls.URL + "/x", "https://localhost:443/x", "https://169.254.169.254/latest/meta-data", "https://0x7f.1/x",
		plain.URL + "/x", "file:///etc/passwd", "https://user:pw@example.invalid/x", "gopher://127.0.0.1/"} {
		err := f.fetch(ctx, "m", 0, mediaRef{Kind: upload.File, URL: u, Key: "k"})
		if !errors.Is(err, errBadURL) && !errors.Is(err, netguard.ErrRefused) {
			t.Errorf("fetch %s: %v, want a refusal", u, err)
		}
	}
	// A test endpoint on loopback opens its own address, not its
	// neighbours'.
	srv := aibottest.New(t)
	f = testFetcher(t, srv.URL())
	if err := f.fetch(ctx, "m", 0, mediaRef{Kind: upload.File, URL: plain.URL + "/x", Key: "k"}); !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("another loopback port: %v, want a refusal", err)
	}
	if ents, _ := os.ReadDir(f.dir); len(ents) != 0 {
		t.Fatalf("refused fetches stored %d entries", len(ents))
	}
	for _, u := range []string{"ws://127.0.0.1:1", "ws://localhost:9", "ws://[::1]:9"} {
		if !isLoopbackURL(u) {
			t.Errorf("%s not taken for loopback", u)
		}
	}
	for _, u := range []string{"wss://openws.work.weixin.qq.com", "ws://127.0.0.1.example.com", "ws://10.0.0.1"} {
		if isLoopbackURL(u) {
			t.Errorf("%s taken for loopback", u)
		}
	}
}

// Too large, a wrong key, a full spool: clear errors, nothing kept.
func TestMediaBadDownloads(t *testing.T) {
	srv := aibottest.New(t)
	f := testFetcher(t, srv.URL())
	ctx := context.Background()
	big, bk := srv.Serve(bytes.Repeat([]byte{1}, upload.MaxImageBytes+64), "")
	if err := f.fetch(ctx, "big", 0, mediaRef{Kind: upload.Image, URL: big, Key: bk}); !errors.Is(err, errTooLarge) {
		t.Fatalf("oversized picture: %v", err)
	}
	// One byte over: the padded ciphertext passes the download's bound,
	// the decrypted size does not.
	big, bk = srv.Serve(bytes.Repeat([]byte{1}, upload.MaxImageBytes+1), "")
	if _, _, err := f.get(ctx, "big1", 0, mediaRef{Kind: upload.Image, URL: big, Key: bk}); !errors.Is(err, errTooLarge) {
		t.Fatalf("picture one byte over: %v", err)
	}
	u, _ := srv.Serve([]byte("hello"), "")
	_, other := srv.Serve([]byte("x"), "")
	if _, _, err := f.get(ctx, "wrongkey", 0, mediaRef{Kind: upload.File, URL: u, Key: other}); !errors.Is(err, aibot.ErrDecrypt) {
		t.Fatalf("wrong key: %v", err)
	}
	// The spool's bound counts what is there (a sparse file stands in).
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(f.dir, "filler")
	if err := os.WriteFile(filler, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, spoolBytes); err != nil {
		t.Fatal(err)
	}
	if err := f.fetch(ctx, "full", 0, mediaRef{Kind: upload.File, URL: u, Key: "k"}); !errors.Is(err, errSpoolFull) {
		t.Fatalf("full spool: %v", err)
	}
	// Entries older than a day are swept at start.
	old := time.Now().Add(-spoolMaxAge - time.Hour)
	os.Chtimes(filler, old, old)
	f.sweep()
	if _, err := os.Stat(filler); !os.IsNotExist(err) {
		t.Fatalf("old spool entry not swept: %v", err)
	}
}

// One message fetches at most maxResources; malformed resources are
// counted, not fetched.
func TestMediaRefsBounded(t *testing.T) {
	var items []map[string]any
	for i := range 10 {
		u := "https://x.example/" + strings.Repeat("a", i)
		if i == 0 {
			u = strings.Repeat("u", maxURL+1)
		}
		items = append(items, map[string]any{"msgtype": "image", "image": map[string]string{"url": u, "aeskey": "k"}})
	}
	body, _ := json.Marshal(map[string]any{"msgtype": "mixed", "mixed": map[string]any{"msg_item": items}})
	m, err := aibot.ParseMessage(body)
	if err != nil {
		t.Fatal(err)
	}
	out, dropped := refs(m)
	if len(out) != maxResources || dropped != 2 {
		t.Fatalf("%d refs, %d dropped", len(out), dropped)
	}
}

// A group message's leading @mention of the bot is not part of the
// question; a mention alone is kept (else the turn would be empty).
func TestStripMention(t *testing.T) {
	for in, want := range map[string]string{
		"@bot hello":          "hello",
		"@机器人\u2005今天天气":      "今天天气",
		"@bot":                "@bot",
		"hello @bot":          "hello @bot",
		"@bot\n  two lines\n": "two lines",
	} {
		if got := stripMention(strings.TrimSpace(in)); got != want {
			t.Errorf("stripMention(%q) = %q, want %q", in, got, want)
		}
	}
}
