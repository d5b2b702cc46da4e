package fakes

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T) (*Upstreams, *http.Client) {
	t.Helper()
	u, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		u.Close()
	})
	return u, client
}

func TestEveryFakeListensOnItsOwnLoopbackPort(t *testing.T) {
	u, _ := start(t)
	seen := map[string]bool{}
	for _, name := range Names() {
		url := u.URL(name)
		if !strings.HasPrefix(url, "http://127.0.0.1:") || seen[url] {
			t.Errorf("%s: URL %q, want a port of its own on 127.0.0.1", name, url)
		}
		seen[url] = true
		if u.Role(name) == "" {
			t.Errorf("%s has no role", name)
		}
	}
	if u.URL("nope") != "" || u.Role("nope") != "" {
		t.Error("an unknown fake has a URL or a role")
	}
}

func TestInventoryKnowsEveryWellFormedISBN(t *testing.T) {
	u, client := start(t)
	// 9780000000001's digits sum to 25: 25%20+1 = 6 copies; an ISBN
	// ending in 0 is sold out; "abc" is no ISBN.
	for isbn, want := range map[string]int{"9780000000001": 6, "978-0-00-000000-0": 0, "abc": -1} {
		resp, err := client.Get(u.URL(Inventory) + "/stock/" + isbn)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Available int }
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		switch {
		case want < 0 && resp.StatusCode != http.StatusNotFound:
			t.Errorf("%s: %d, want 404", isbn, resp.StatusCode)
		case want >= 0 && (err != nil || got.Available != want):
			t.Errorf("%s: %d available (%v), want %d", isbn, got.Available, err, want)
		}
	}
}

// register posts one payment until the fake accepts it (it refuses
// about one in twelve with 429) and returns its ID.
func register(t *testing.T, client *http.Client, url, key string) string {
	t.Helper()
	for range 50 {
		req, _ := http.NewRequest(http.MethodPost, url+"/payments", strings.NewReader(`{"order_id":"o1","amount_cents":500}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			return got.ID
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("payments: %d (Retry-After %q), want 201 or 429 with Retry-After: 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	t.Fatal("payments refused 50 requests in a row")
	return ""
}

func TestPaymentsGivesAReplayTheSameID(t *testing.T) {
	u, client := start(t) // the first storm starts 2s after Start
	a, b := register(t, client, u.URL(Payments), "k1"), register(t, client, u.URL(Payments), "k1")
	if a == "" || a != b {
		t.Errorf("two registrations with one Idempotency-Key got %q and %q", a, b)
	}
	if c := register(t, client, u.URL(Payments), "k2"); c == a {
		t.Errorf("another key got the same ID %q", c)
	}
}

func TestPaymentsStormsFromTwoToFiveSecondsOfEachCycle(t *testing.T) {
	u := &Upstreams{start: time.Unix(1000, 0)}
	for at, want := range map[time.Duration]bool{
		0: false, 1999 * time.Millisecond: false, 2 * time.Second: true, 4999 * time.Millisecond: true,
		5 * time.Second: false, 12 * time.Second: true, 15 * time.Second: false,
	} {
		if got := u.storming(u.start.Add(at)); got != want {
			t.Errorf("storming at %v = %v, want %v", at, got, want)
		}
	}
}

func TestShippingNeverAnswersAndCloseReleasesIt(t *testing.T) {
	u, _ := start(t)
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}}
	defer client.CloseIdleConnections()
	_, err := client.Get(u.URL(Shipping) + "/quotes/9780000000001")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("shipping: %v, want a response header timeout", err)
	}
	u.Close() // returns only once every handler has returned
	u.Close()
}
