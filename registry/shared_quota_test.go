package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
)

// quotaFleet is a QuotaFleet that gives a quotaFake for each system at
// RATE_SCOPE=fleet and keeps what it was told of each.
type quotaFleet struct {
	mu      sync.Mutex
	systems map[string]FleetSystem
	shared  map[string]*quotaFake
}

func (f *quotaFleet) SharedQuota(sys FleetSystem, local SharedQuota) (SharedQuota, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.systems == nil {
		f.systems, f.shared = map[string]FleetSystem{}, map[string]*quotaFake{}
	}
	if local == nil {
		return nil, errors.New(sys.Name + ": no local quota given")
	}
	q := &quotaFake{}
	f.systems[sys.Name], f.shared[sys.Name] = sys, q
	return q, nil
}

func (f *quotaFleet) Circuit(sys FleetSystem, _ Circuit) (Circuit, error) {
	return nil, errors.New("no breaker in this fleet: " + sys.Name)
}

func (f *quotaFleet) Quota(sys FleetSystem, _ Quota) (Quota, error) {
	return nil, fmt.Errorf("%s: a QuotaFleet was asked for a Quota", sys.Name)
}

// quotaFake is a SharedQuota that grants every token until refuse is
// set, and keeps what it is told.
type quotaFake struct {
	mu     sync.Mutex
	refuse bool
	waits  int
	pauses []time.Time
	rate   string
}

func (q *quotaFake) Wait(ctx context.Context, _ time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waits++
	if q.refuse {
		return fmt.Errorf("the fleet's share is spent: %w", ErrRateLimited)
	}
	return ctx.Err()
}

func (q *quotaFake) Pause(until time.Time) {
	q.mu.Lock()
	q.pauses = append(q.pauses, until)
	q.mu.Unlock()
}

func (q *quotaFake) Status() observe.RateStatus {
	return observe.RateStatus{Limit: "100/s", Scope: "fleet", Share: 25, Synced: true}
}

func (q *quotaFake) SetRate(r config.Rate) {
	q.mu.Lock()
	q.rate = r.String()
	q.mu.Unlock()
}

func (q *quotaFake) seen() (waits, pauses int, rate string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waits, len(q.pauses), q.rate
}

// pauseLog is a changeLog that also keeps the pauses it is told.
type pauseLog struct {
	changeLog
	pauses []string
}

func (l *pauseLog) ObservePause(system string, _ time.Time, status int) {
	l.mu.Lock()
	l.pauses = append(l.pauses, fmt.Sprintf("%s %d", system, status))
	l.mu.Unlock()
}

func (l *pauseLog) told() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.pauses, "; ")
}

func quotaEnv(baseURL string) map[string]string {
	env := fleetEnv(baseURL)
	env["PAY_BREAKER_SCOPE"] = "local"
	env["PAY_RATE_SCOPE"], env["PAY_RATE_LIMIT"] = "fleet", "100/s"
	return env
}

// A fleet that shares its quotas as SharedQuotas stands in for the rate
// stage of each system at RATE_SCOPE=fleet: it is asked for no Quota;
// every request takes its token from it, and its refusal is the call's
// (no I/O, matching ErrRateLimited); the upstream's 429 pauses it; a pause
// it reports through the FleetSystem's Pauses reaches the observers;
// Status shows it. A system at scope local is not asked for.
func TestSharedQuotaTakesTheRateStagesPlace(t *testing.T) {
	t.Parallel()
	srv := testutil.Script(t,
		outboundtest.Reply{Status: http.StatusOK},
		outboundtest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}})
	obs := &pauseLog{}
	fleet := &quotaFleet{}
	loaded, err := config.LoadEnv(quotaEnv(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(loaded, WithObserver(obs), WithFleet(fleet))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sys, q := fleet.systems["pay"], fleet.shared["pay"]
	if len(fleet.systems) != 1 || q == nil || sys.Pauses == nil || sys.Settings.RateLimit != "100/s" {
		t.Fatalf("the fleet was asked for %d quotas (pay: %+v), want pay's alone, with Pauses and its rate", len(fleet.systems), sys)
	}
	pay := r.MustClient("pay")

	resp, _, err := tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
	if err != nil {
		t.Fatal(err)
	}
	tbrRead(t, resp)
	if waits, _, _ := q.seen(); waits != 1 {
		t.Errorf("one request sent: the shared quota was asked %d times, want 1", waits)
	}

	// A pause learned from another pod reaches the observers.
	sys.Pauses(time.Now().Add(time.Millisecond))
	if got := obs.told(); got != "pay 0" {
		t.Errorf("observers told of pauses %q, want the one the shared quota learned (status 0: another pod's)", got)
	}

	// The upstream's 429 with Retry-After pauses the shared quota.
	resp, _, err = tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
	if err == nil {
		tbrRead(t, resp)
	}
	if _, pauses, _ := q.seen(); pauses != 1 {
		t.Errorf("after a 429 with Retry-After: the shared quota was paused %d times, want 1", pauses)
	}

	// Its refusal is the call's, with nothing sent.
	q.mu.Lock()
	q.refuse = true
	q.mu.Unlock()
	before := srv.Hits()
	_, _, err = tbrGet(t, tbrCtx(t, 5*time.Second), pay, "/")
	if !errors.Is(err, ErrRateLimited) {
		t.Errorf("the shared quota refused: error %v, want one matching ErrRateLimited", err)
	}
	if n := srv.Hits() - before; n != 0 {
		t.Errorf("the shared quota refused, yet %d requests reached the upstream", n)
	}

	if st := pay.Status(); st.Rate == nil || st.Rate.Scope != "fleet" || st.Rate.Share != 25 || !st.Rate.Synced {
		t.Errorf("Status().Rate = %+v, want the shared quota's", st.Rate)
	}
}

// A change of the settings file's rate reaches a shared quota by its
// SetRate, and the system keeps it: no restart, no new quota.
func TestSharedQuotaTakesARateChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings")
	if err := writeSettings(path, []byte("PAY_RATE_LIMIT=100/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet := &quotaFleet{}
	r := liveRegistry(t, quotaEnv("http://127.0.0.1:1"), path, WithFleet(fleet))
	q := fleet.shared["pay"]
	reloader(t, r, path)("PAY_RATE_LIMIT=40/s\n")
	if _, _, rate := q.seen(); rate != "40/s" {
		t.Errorf("after the change, the shared quota's rate is %q, want 40/s", rate)
	}
	if fleet.shared["pay"] != q {
		t.Error("the change built another shared quota; want the same one kept")
	}
}
