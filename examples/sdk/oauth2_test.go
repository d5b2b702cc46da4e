package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
)

// oauthUpstreams are a token endpoint and an API on two hosts, as a
// provider runs them: the API answers only the token the endpoint issued.
func oauthUpstreams(t *testing.T) (auth, api *httptest.Server, tokens, calls *atomic.Int32) {
	tokens, calls = new(atomic.Int32), new(atomic.Int32)
	auth = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600})
	}))
	api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "me")
	}))
	t.Cleanup(func() { auth.Close(); api.Close() })
	return auth, api, tokens, calls
}

// With golang.org/x/oauth2, the token endpoint is a system of its own
// (auth, another host than the API's), whose HTTPClient goes in the token
// source's context; the API's requests run through the API system's
// pipeline, the token added by an oauth2.Transport wrapped around it.
func TestOAuth2TokenAndCallsEachThroughTheirSystem(t *testing.T) {
	auth, api, tokens, calls := oauthUpstreams(t)
	reg := registrytest.New(t, map[string]string{
		"OUTBOUND_SYSTEMS": "auth,api",
		"AUTH_BASE_URL":    auth.URL,
		"API_BASE_URL":     api.URL + "/v1",
	})
	authC, apiC := reg.MustClient("auth"), reg.MustClient("api")

	// The token source keeps this context for every refresh: not a
	// request's, which ends.
	tokenCtx := context.WithValue(context.Background(), oauth2.HTTPClient, authC.HTTPClient())
	cc := clientcredentials.Config{ClientID: "checkout", ClientSecret: "s3cret",
		TokenURL: authC.BaseURL().JoinPath("oauth/token").String()}
	hc := apiC.HTTPClient() // a copy: wrapping its Transport changes no other
	hc.Transport = &oauth2.Transport{Source: cc.TokenSource(tokenCtx), Base: hc.Transport}

	for range 2 {
		req, _ := http.NewRequestWithContext(bounded(t), http.MethodGet, apiC.BaseURL().JoinPath("me").String(), nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "me" {
			t.Fatalf("GET me: %d %q, want 200 \"me\"", resp.StatusCode, body)
		}
	}
	if tokens.Load() != 1 || calls.Load() != 2 {
		t.Errorf("%d token requests and %d API calls, want 1 (the token is reused) and 2", tokens.Load(), calls.Load())
	}
	if n := authC.Status().Calls; n != 1 {
		t.Errorf("system auth made %d calls, want the token request", n)
	}
	if n := apiC.Status().Calls; n != 2 {
		t.Errorf("system api made %d calls, want 2", n)
	}
}

// The API's client in the context of clientcredentials.Config.Client, the
// shortcut of oauth2's docs, sends the token request through the API's
// system: another origin than its BASE_URL, so outbound refuses it with
// nothing sent, and the call fails with ErrOtherOrigin.
func TestOAuth2TokenThroughTheAPIsSystemIsRefused(t *testing.T) {
	auth, api, tokens, calls := oauthUpstreams(t)
	reg := registrytest.New(t, map[string]string{"OUTBOUND_SYSTEMS": "api", "API_BASE_URL": api.URL + "/v1"})
	apiC := reg.MustClient("api")

	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, apiC.HTTPClient())
	cc := clientcredentials.Config{ClientID: "checkout", ClientSecret: "s3cret", TokenURL: auth.URL + "/oauth/token"}
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodGet, apiC.BaseURL().JoinPath("me").String(), nil)
	resp, err := cc.Client(ctx).Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the token request through the API's system got %d, want it refused", resp.StatusCode)
	}
	if !errors.Is(err, registry.ErrOtherOrigin) {
		t.Errorf("err = %v, want registry.ErrOtherOrigin", err)
	}
	if tokens.Load() != 0 || calls.Load() != 0 {
		t.Errorf("%d token requests and %d API calls were sent, want none", tokens.Load(), calls.Load())
	}
}
