package wecombot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"agent/pkg/channel/upload"
	"agent/pkg/clock"
	"agent/pkg/egress"
	"agent/pkg/netguard"
	"agent/pkg/wecom/aibot"
)

// Pictures, files and videos arrive as a URL and a per-resource AES key.
// WeCom's URLs last only minutes, while a message may wait longer for its
// turn (behind the sender's running turn, or across a restart), so each
// resource is downloaded as soon as its message is stored, into a spool
// in the state directory, still encrypted (the key stays in the inbox
// row). The turn decrypts it into the sender's uploads (pkg/channel/
// upload, as on the app channel) and the spool entry is deleted with the
// row's commit.

// Bounds of the media of one message and of the spool.
const (
	maxResources = 8    // per message; the rest are named, not fetched
	maxURL       = 2048 // bytes of a resource URL
	maxAESKey    = 64   // bytes of a base64 key (44 for 32 bytes)
	spoolBytes   = 256 << 20
	spoolMaxAge  = 24 * time.Hour
	fetchTime    = time.Minute
	fetchers     = 2 // downloads at once
)

// mediaRef is one resource of a stored message.
type mediaRef struct {
	Kind string `json:"kind"` // upload.Image, File, Video
	URL  string `json:"url"`
	Key  string `json:"key"`
}

var (
	errTooLarge   = errors.New("larger than accepted")
	errSpoolFull  = errors.New("the media spool is full")
	errBadURL     = errors.New("not a media URL this channel fetches")
	errNotFetched = errors.New("not downloaded")
)

// fetcher downloads resources into the spool, a few at a time.
type fetcher struct {
	dir string
	// loopback allows http:// and the endpoint's own loopback address (a
	// test server: only when wecom_bot.url itself is on loopback);
	// otherwise only https URLs to public addresses are fetched.
	loopback bool
	client   *http.Client
	clock    clock.Clock
	logger   *slog.Logger
	sem      chan struct{}
	spoolMu  sync.Mutex // writes to the spool, so its bound holds

	mu      sync.Mutex
	running map[string]chan struct{} // msgid -> closed when its downloads end
	wg      sync.WaitGroup           // the downloads in flight
}

// close waits for the downloads in flight (their context has ended).
func (f *fetcher) close() { f.wg.Wait() }

func newFetcher(dir, botURL string, led *egress.Ledger, c clock.Clock, logger *slog.Logger) *fetcher {
	f := &fetcher{dir: dir, clock: clock.Or(c), logger: logger, sem: make(chan struct{}, fetchers), running: map[string]chan struct{}{}}
	// Every connection goes through a netguard.Guard: public addresses on
	// ports 80 and 443 only, checked after resolution and on every
	// redirect, whatever WeCom's URL (or a redirect) names. A test
	// endpoint on loopback opens its own address and port, nothing else.
	var allow []netguard.Rule
	if u, err := url.Parse(botURL); err == nil && isLoopbackURL(botURL) {
		f.loopback = true
		if r, err := netguard.ParseRule(u.Host); err == nil {
			allow = append(allow, r)
		}
	}
	cc := netguard.ClientConfig{Timeout: fetchTime, MaxRedirects: 3}
	if led != nil { // counted, and held to privacy.egress_allow
		cc.Around = func(next netguard.DialFunc) netguard.DialFunc { return led.Wrap(egress.WeComBot, next) }
	}
	f.client = netguard.New(netguard.Config{Allow: allow, Logger: logger}).Client(cc)
	guarded := f.client.CheckRedirect
	f.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := f.checkURL(req.URL); err != nil {
			return err
		}
		return guarded(req, via)
	}
	return f
}

// checkURL refuses what is not an https URL (or, in loopback mode, an
// http one).
func (f *fetcher) checkURL(u *url.URL) error {
	if u.Scheme == "https" || (f.loopback && u.Scheme == "http") {
		if u.Host != "" && u.User == nil {
			return nil
		}
	}
	return errBadURL
}

// spoolPath names the i-th resource of a message in the spool.
func (f *fetcher) spoolPath(msgID string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", msgID, i)))
	return filepath.Join(f.dir, hex.EncodeToString(h[:16]))
}

// start downloads a stored message's resources in the background.
func (f *fetcher) start(ctx context.Context, msgID string, refs []mediaRef) {
	if len(refs) == 0 {
		return
	}
	done := make(chan struct{})
	f.mu.Lock()
	if _, ok := f.running[msgID]; ok {
		f.mu.Unlock()
		return
	}
	f.running[msgID] = done
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.running, msgID)
			f.mu.Unlock()
			close(done)
		}()
		for i, r := range refs {
			if err := f.fetch(ctx, msgID, i, r); err != nil && ctx.Err() == nil {
				f.logger.Warn("wecom_bot: media not downloaded", "msgid", msgID, "kind", r.Kind, "err", err)
			}
		}
	}()
}

// wait returns when msgID's downloads have ended (or ctx).
func (f *fetcher) wait(ctx context.Context, msgID string) {
	f.mu.Lock()
	done := f.running[msgID]
	f.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// fetch downloads one resource into the spool, unless it is there.
func (f *fetcher) fetch(ctx context.Context, msgID string, i int, r mediaRef) error {
	p := f.spoolPath(msgID, i)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return errBadURL
	}
	if err := f.checkURL(u); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTime)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download answered %s", resp.Status)
	}
	// The ciphertext is the plain size padded to 32 bytes.
	limit := upload.Limit(r.Kind) + 32
	if resp.ContentLength > limit {
		return errTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > limit {
		return errTooLarge
	}
	name := ""
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		name = upload.Clean(params["filename"], 255)
	}
	return f.put(p, data, name)
}

// put writes a spool entry (and its file name) atomically, within the
// spool's bound.
func (f *fetcher) put(p string, data []byte, name string) error {
	f.spoolMu.Lock()
	defer f.spoolMu.Unlock()
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	if used := dirSize(f.dir); used+int64(len(data)) > spoolBytes {
		return errSpoolFull
	}
	if name != "" {
		if err := os.WriteFile(p+".name", []byte(name), 0o600); err != nil {
			return err
		}
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, p)
}

// get returns a resource decrypted, and the file name its download gave.
// When the spool lacks it (a restart during the download), it is fetched
// now: WeCom's URL may still be valid.
func (f *fetcher) get(ctx context.Context, msgID string, i int, r mediaRef) ([]byte, string, error) {
	p := f.spoolPath(msgID, i)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		if ferr := f.fetch(ctx, msgID, i, r); ferr != nil {
			return nil, "", fmt.Errorf("%w: %w", errNotFetched, ferr)
		}
		data, err = os.ReadFile(p)
	}
	if err != nil {
		return nil, "", err
	}
	name, _ := os.ReadFile(p + ".name")
	plain, err := aibot.DecryptMedia(data, r.Key)
	if err != nil {
		return nil, "", err
	}
	if int64(len(plain)) > upload.Limit(r.Kind) {
		return nil, "", errTooLarge
	}
	return plain, string(name), nil
}

// drop deletes a message's spool entries (its row is committed).
func (f *fetcher) drop(msgID string, n int) {
	for i := range n {
		p := f.spoolPath(msgID, i)
		os.Remove(p)
		os.Remove(p + ".name")
	}
}

// sweep deletes spool entries older than spoolMaxAge (their rows were
// committed by a daemon that crashed before deleting them, or never
// will be answered).
func (f *fetcher) sweep() {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return
	}
	cutoff := f.clock.Now().Add(-spoolMaxAge)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(f.dir, e.Name()))
		}
	}
}

func dirSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// refs lists a message's downloadable resources (at most maxResources;
// malformed ones are left out).
func refs(m aibot.Message) (out []mediaRef, dropped int) {
	add := func(kind string, r *aibot.Resource) {
		if r == nil {
			return
		}
		if len(out) >= maxResources || r.URL == "" || len(r.URL) > maxURL || r.AESKey == "" || len(r.AESKey) > maxAESKey {
			dropped++
			return
		}
		out = append(out, mediaRef{Kind: kind, URL: r.URL, Key: r.AESKey})
	}
	switch m.MsgType {
	case "image":
		add(upload.Image, m.Image)
	case "file":
		add(upload.File, m.File)
	case "video":
		add(upload.Video, m.Video)
	case "mixed":
		if m.Mixed != nil {
			for _, it := range m.Mixed.Items {
				add(upload.Image, it.Image)
			}
		}
	}
	return out, dropped
}

// isLoopbackURL reports whether the connection's URL names a loopback
// host (the test server).
func isLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// mediaFailure is what a resource's failure tells the model and the user.
func mediaFailure(kind string, err error) upload.Result {
	return upload.NotDownloaded(kind, errors.Is(err, errTooLarge))
}
