package browser_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

// chromiumPath finds a Chromium binary: $OUTBOUND_CHROMIUM, Debian's
// /usr/bin/chromium, or one of the usual names on $PATH.
func chromiumPath() string {
	if p := os.Getenv("OUTBOUND_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestBrowserLiveUpdate loads the status page in headless Chromium,
// checks that every system is shown, opens one system's breaker with a
// 5xx storm and waits, without reloading, for its breaker cell to turn
// "open" (and red). It saves screenshots, light and dark, to
// $OUTBOUND_SCREENSHOT_DIR (CI keeps them as artefacts) or a temporary
// directory.
func TestBrowserLiveUpdate(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium binary found and CI=true: install Debian's chromium package (.ci/run does)")
		}
		t.Skip("no Chromium binary found (install Debian's chromium package, or set OUTBOUND_CHROMIUM); under CI=true this test fails instead")
	}

	// Upstreams: inventory fails on demand, payments is healthy, and
	// shipping holds 3 of its 4 permits at a gate.
	var failing atomic.Bool
	up := outboundtest.NewUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/hold") {
			<-r.Context().Done() // until the caller's budget runs out
			return
		}
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		time.Sleep(2 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	}))
	gate := outboundtest.NewHang(outboundtest.Reply{Body: "late"})
	slow := outboundtest.NewUpstream(t, gate)

	t.Setenv("OUTBOUND_SYSTEMS", "inventory,payments,shipping")
	t.Setenv("INVENTORY_BASE_URL", up.URL+"/inventory")
	t.Setenv("INVENTORY_RETRIES", "1")
	t.Setenv("INVENTORY_BACKOFF_BASE", "1ms")
	t.Setenv("INVENTORY_BACKOFF_MAX", "2ms")
	t.Setenv("INVENTORY_BREAKER_MIN_REQUESTS", "5")
	t.Setenv("INVENTORY_BREAKER_OPEN_TIMEOUT", "1h")
	t.Setenv("PAYMENTS_BASE_URL", "http://svc:pa55w0rd@"+up.Addr()+"/pay/v2?api_key=k3y")
	t.Setenv("PAYMENTS_CALL_TIMEOUT", "20s")
	t.Setenv("PAYMENTS_READ_TIMEOUT", "15s")
	t.Setenv("SHIPPING_BASE_URL", slow.URL)
	t.Setenv("SHIPPING_MAX_CONCURRENT", "4")
	// The 3 held calls must outlive the whole test, however slow the
	// machine: the page is read while they are still in flight.
	t.Setenv("SHIPPING_READ_TIMEOUT", "60s")
	t.Setenv("SHIPPING_CALL_TIMEOUT", "90s")

	rec := statuspage.NewRecorder()
	reg, err := registry.FromEnvWith(nil, registry.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	inv, pay, ship := reg.MustClient("inventory"), reg.MustClient("payments"), reg.MustClient("shipping")
	for range 40 {
		call(t, inv, "/stock/1")
		call(t, pay, "/charges")
	}
	// Callers with a deadline: their calls are capped by their budget.
	for range 3 {
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(bctx, http.MethodGet, "/charges", nil)
		if resp, err := pay.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		bcancel()
	}
	var held sync.WaitGroup
	defer held.Wait()
	defer gate.Release()
	for range 3 {
		held.Go(func() { call(t, ship, "/quote") })
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := gate.WaitFor(wctx, 3); err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/debug/outbound/", http.StripPrefix("/debug/outbound", statuspage.Handler(reg, rec)))
	site := httptest.NewServer(mux)
	defer site.Close()

	// The browser. Its allocator's deadline bounds the whole test: when
	// it passes, Chromium is stopped and every action fails.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	bctx, bcancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer bcancel()
	actx, acancel := chromedp.NewExecAllocator(bctx, opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer func() {
		// Close the browser gracefully and wait for it, so no process,
		// goroutine or file in the profile outlives the test.
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		if err := chromedp.Cancel(cctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancel()
		acancel()
	}()

	pageURL := site.URL + "/debug/outbound/"
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1360, 900),
		chromedp.Navigate(pageURL),
	); err != nil {
		t.Fatalf("navigate to %s: %v", pageURL, err)
	}

	const breakerOf = `document.querySelector('[data-system=%q] [data-f="breaker"]')`
	js := fmt.Sprintf

	// Every system is shown, inventory's breaker closed.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		js(`document.querySelectorAll('[data-system]').length === 3 && `+breakerOf+`?.textContent === "closed"`, "inventory"),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("page never showed the three systems: %v", err)
	}
	names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-system]')].map(e => e.dataset.system + ":" + e.querySelector('[data-f="breaker"]').textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, " "); got != "inventory:closed payments:closed shipping:closed" {
		t.Errorf("systems on the page: %s", got)
	}
	closedColour, err := chromedp.Run(ctx, chromedp.Evaluate[string](js(`getComputedStyle(`+breakerOf+`).color`, "inventory")))
	if err != nil {
		t.Fatal(err)
	}
	// A marker that a reload would wipe.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__noReload = "still here"`)); err != nil {
		t.Fatal(err)
	}

	// The storm: inventory answers 503 until its breaker opens.
	failing.Store(true)
	for i := 0; i < 50 && inv.Status().Breaker != observe.BreakerOpen; i++ {
		call(t, inv, "/stock/1")
	}
	if s := inv.Status().Breaker; s != observe.BreakerOpen {
		t.Fatalf("inventory breaker %s after the storm, want open", s)
	}
	call(t, inv, "/stock/1") // refused: shows a breaker rejection, not a failure

	start := time.Now()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js(breakerOf+`?.textContent === "open"`, "inventory"),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the breaker cell never turned open: %v", err)
	}
	t.Logf("the page showed the open breaker %v after the storm", time.Since(start).Round(time.Millisecond))

	type pageState struct {
		Marker      string `json:"marker"`
		CardState   string `json:"cardState"`
		OpenColour  string `json:"openColour"`
		Summary     string `json:"summary"`
		Title       string `json:"title"`
		PayBase     string `json:"payBase"`
		InvRejected string `json:"invRejected"`
		ShipFlight  string `json:"shipFlight"`
		InvError    string `json:"invError"`
		InvSince    string `json:"invSince"`
		Text        string `json:"text"`
	}
	st, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](js(`({
		marker: window.__noReload || "",
		cardState: document.querySelector('[data-system="inventory"]').dataset.state,
		openColour: getComputedStyle(`+breakerOf+`).color,
		summary: document.getElementById("summary").textContent,
		title: document.title,
		payBase: document.querySelector('[data-system="payments"] [data-f="base"]').textContent,
		invRejected: document.querySelector('[data-system="inventory"] [data-f="breaker_refused"]').textContent,
		shipFlight: document.querySelector('[data-system="shipping"] [data-f="in_flight"]').textContent,
		invError: document.querySelector('[data-system="inventory"] [data-f="error"]').textContent,
		invSince: document.querySelector('[data-system="inventory"] [data-f="since"]').textContent,
		text: document.body.innerText,
	})`, "inventory")))
	if err != nil {
		t.Fatal(err)
	}
	if st.Marker != "still here" {
		t.Error("the page reloaded: the marker set before the storm is gone")
	}
	if st.CardState != "open" || st.OpenColour == closedColour {
		t.Errorf("card state %q, badge colour %s (closed was %s): want open in another colour", st.CardState, st.OpenColour, closedColour)
	}
	if !strings.Contains(st.Summary, "1 open") || !strings.HasPrefix(st.Title, "1 open") {
		t.Errorf("summary %q, title %q: want 1 open", st.Summary, st.Title)
	}
	// The error shown is the failure that opened the breaker, not the
	// refusal after it; the badge says when probes go (open for 1h).
	if st.InvRejected != "1" || st.ShipFlight != "3" || !strings.Contains(st.InvError, "opened the breaker: GET attempt") ||
		!strings.Contains(st.InvError, "503 Service Unavailable") {
		t.Errorf("inventory breaker rejections %q, error %q; shipping in flight %q", st.InvRejected, st.InvError, st.ShipFlight)
	}
	if !strings.Contains(st.InvSince, "half-open in 59m") && !strings.Contains(st.InvSince, "half-open in 1h") {
		t.Errorf("inventory since %q, want the time left until half-open", st.InvSince)
	}
	if !strings.Contains(st.PayBase, "REDACTED") {
		t.Errorf("payments base URL %q: want it redacted", st.PayBase)
	}
	for _, secret := range []string{"pa55w0rd", "k3y"} {
		if strings.Contains(st.Text, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}

	// Calls the open breaker refuses are calls: calls/s is not 0 while
	// it refuses them, and refused/s says how many of them it refuses.
	const invRates = `[...document.querySelectorAll('[data-system="inventory"] [data-f="rate"], [data-system="inventory"] [data-f="refused_rate"]')].map(e => Number(e.textContent))`
	refusing, stopRefusing := context.WithCancel(context.Background())
	var refused sync.WaitGroup
	refused.Go(func() {
		for refusing.Err() == nil {
			call(t, inv, "/stock/1")
			time.Sleep(5 * time.Millisecond)
		}
	})
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(([calls, refused]) => refused > 0 && calls >= refused)(`+invRates+`)`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
	stopRefusing()
	refused.Wait()
	if err != nil {
		rates, _ := chromedp.Run(ctx, chromedp.Evaluate[[]float64](invRates))
		t.Errorf("calls/s and refused/s while the breaker refuses calls: %v, want both above 0: %v", rates, err)
	}

	// Budget capped is information, plain, until a capped call runs out
	// of its budget: then it turns amber.
	const budgetOf = `(() => [...document.querySelectorAll('[data-system="payments"] [data-f="budget_capped"], [data-system="payments"] [data-f="budget_timeouts"]')].map(e => e.textContent + " " + e.className + " " + getComputedStyle(e).fontWeight))()`
	budget, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](budgetOf))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(budget, ", ") != "3 plain 400, 0 zero 400" {
		t.Errorf("payments budget capped, ran out: %q, want 3 in plain weight, none ran out", budget)
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 1100*time.Millisecond) // a budget of 1 s
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "/hold", nil)
	if resp, err := pay.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Errorf("payments /hold answered %s, want the budget to run out", resp.Status)
	}
	hcancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](budgetOf+`.join(", ") === "4 warm 600, 1 warm 600"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		budget, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](budgetOf))
		t.Errorf("payments budget capped, ran out after a budget ran out: %q, want both amber: %v", budget, err)
	}

	// Forced open for 10 minutes, the card says when the override ends.
	if err := inv.Force(observe.BreakerOpen, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	const sinceOf = `document.querySelector('[data-system="inventory"] [data-f="since"]').textContent`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`/override ends in (9m|10m)/.test(`+sinceOf+`)`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		since, _ := chromedp.Run(ctx, chromedp.Evaluate[string](sinceOf))
		t.Errorf("inventory forced open: %q, want the time left until the override ends: %v", since, err)
	}

	// Open inventory's configuration: it must stay open across polls
	// (cards are updated in place, not rebuilt).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`document.querySelector('[data-system="inventory"] details.config').open = true`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => {
		const t0 = window.__t0 || (window.__t0 = document.getElementById("updated").textContent);
		return document.getElementById("updated").textContent !== t0;
	})()`, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("no poll after opening the configuration: %v", err)
	}
	cfg, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const d = document.querySelector('[data-system="inventory"] details.config');
		return [String(d.open), ...[...d.querySelectorAll("tr.set")].map(tr => tr.innerText.replace(/\s+/g, " "))];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg) == 0 || cfg[0] != "true" || !slices.ContainsFunc(cfg, func(s string) bool { return strings.HasPrefix(s, "BREAKER_MIN_REQUESTS 5 env") }) {
		t.Errorf("inventory configuration after a poll: %q, want it open with BREAKER_MIN_REQUESTS 5 env", cfg)
	}

	// Screenshots, light then dark.
	dir := os.Getenv("OUTBOUND_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
	shoot("statuspage.png")
	dark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	})
	if err := chromedp.Do(ctx, dark, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatalf("dark mode: %v", err)
	}
	shoot("statuspage-dark.png")
}

// call sends one GET through c and discards the answer; failures are the
// point of several calls here, so errors are ignored.
func call(t *testing.T, c *registry.Client, path string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	resp, err := c.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
