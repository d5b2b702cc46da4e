package loopback

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckAcceptsOnlyLoopbackAddresses(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8089": true, "localhost:0": true, "[::1]:80": true, "127.1.2.3:9": true,
		":8089": false, "0.0.0.0:1": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if err := Check(addr); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

func TestServeTakesAFreePortWhenTheAddressIsBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s, err := Serve(busy.Addr().String(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "served")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if strings.Contains(s.URL, busy.Addr().String()) || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL %s: want another port of 127.0.0.1 than the busy %s", s.URL, busy.Addr())
	}
	if !strings.Contains(s.Note, "is busy") {
		t.Errorf("Note %q does not say the address was busy", s.Note)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served" {
		t.Errorf("GET %s = %q, want the handler's answer", s.URL, body)
	}
}

func TestServeOnAFreeAddressHasNoNote(t *testing.T) {
	s, err := Serve("127.0.0.1:0", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Note != "" {
		t.Errorf("Note = %q on a free address", s.Note)
	}
}
