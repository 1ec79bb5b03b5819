package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type pairBackend struct{ fakeBackend }

func (pairBackend) PairingList(context.Context) ([]Pairing, error) {
	return []Pairing{{User: "wecom:zed", State: "pending", Code: "ABCD2345"}}, nil
}
func (pairBackend) PairingApprove(_ context.Context, code string) (Pairing, error) {
	if code != "ABCD2345" {
		return Pairing{}, fmt.Errorf("%w: no pending code %q", ErrNotFound, code)
	}
	return Pairing{User: "wecom:zed", State: "approved"}, nil
}
func (pairBackend) PairingRevoke(_ context.Context, user string) (Pairing, error) {
	return Pairing{User: user, State: "approved"}, nil
}

func TestPairingAPI(t *testing.T) {
	srv := httptest.NewServer(Handler(fakeBackend{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/pairing")
	if err != nil || resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("without a backend: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	srv2 := httptest.NewServer(Handler(pairBackend{}))
	defer srv2.Close()
	resp, err = http.Post(srv2.URL+"/v1/pairing/approve", "application/json", strings.NewReader(`{"code":"XXXX"}`))
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown code: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	resp, err = http.Post(srv2.URL+"/v1/pairing/revoke", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no user: %v %v", resp.Status, err)
	}
	resp.Body.Close()
}
