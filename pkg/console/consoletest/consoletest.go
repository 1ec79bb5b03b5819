// Package consoletest signs a test client in to the web console as a
// browser does with the link `agentctl console` prints.
package consoletest

import (
	"net/http"
	"strings"
	"testing"

	"agent/pkg/console"
)

// SignIn opens the one-time link without following its redirect and
// returns the response (body closed), the session cookie and the session
// key from the redirect's fragment ("/#key=..."); cookie is nil and key ""
// when the link was refused.
func SignIn(t testing.TB, link string) (resp *http.Response, cookie *http.Cookie, key string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			cookie = c
		}
	}
	key, _ = strings.CutPrefix(resp.Header.Get("Location"), "/#key=")
	return resp, cookie, key
}
