package statuspage

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/registry"
)

// PollInterval is how often the page asks for status.json.
const PollInterval = time.Second

//go:embed page.html
var page []byte

// pageCSP allows the page's own inline style and script (by hash) and
// fetches to its own origin, nothing else: no CDN, no framing.
var pageCSP = "default-src 'none'; " +
	"style-src " + inlineHash(page, "<style>", "</style>") + "; " +
	"script-src " + inlineHash(page, "<script>", "</script>") + "; " +
	"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash returns the CSP source of the first open...close element's
// content.
func inlineHash(doc []byte, open, close string) string {
	i := bytes.Index(doc, []byte(open))
	j := bytes.Index(doc, []byte(close))
	if i < 0 || j < i {
		panic("statuspage: page.html has no " + open + " element")
	}
	sum := sha256.Sum256(doc[i+len(open) : j])
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Snapshot is the body of status.json.
type Snapshot struct {
	GeneratedAt    time.Time      `json:"generated_at"`
	PollIntervalMS int64          `json:"poll_interval_ms"`
	Systems        []SystemStatus `json:"systems"`
	// Settings is the state of the settings file (OUTBOUND_CONFIG_FILE):
	// the version this pod runs and the last change refused; absent
	// without one.
	Settings *observe.SettingsStatus `json:"settings,omitempty"`
}

// SystemStatus is one system in a [Snapshot]: the registry's Status
// (fields inline) and what the [Recorder] saw (without one, the fields
// below are empty, but for an override's NextChange).
type SystemStatus struct {
	observe.Status
	// Latency of the recent calls that sent an attempt; null without a
	// recorder or before the first call.
	Latency *Latency `json:"latency"`
	// CallRate is the rate of the calls that ended recently, refused
	// ones included; null without a recorder.
	CallRate *CallRate `json:"call_rate"`
	// BudgetTimeouts counts the calls the caller's deadline ended (op
	// budget timeout): of the BudgetCapped calls, those whose budget ran
	// out. The page shows budget_capped plain, as information, unless
	// this is above 0.
	BudgetTimeouts uint64 `json:"budget_timeouts"`
	// BreakerChangedAt is the time of the last breaker transition the
	// recorder saw; absent when none.
	BreakerChangedAt *time.Time `json:"breaker_changed_at,omitempty"`
	// HalfOpenAt is when an open breaker lets its first probes through:
	// the breaker's last change plus BREAKER_OPEN_TIMEOUT (at the latest:
	// at BREAKER_SCOPE=fleet another pod may have opened it earlier).
	// Absent unless the breaker is open on its own judgement (an
	// override shows its end in Forced) and the recorder saw it open.
	HalfOpenAt *time.Time `json:"half_open_at,omitempty"`
	// NextChange is the breaker's next change by itself and the time left
	// until it: an override's end, or an open breaker's turn to
	// half-open (HalfOpenAt). Absent when none is due.
	NextChange *NextChange `json:"next_change,omitempty"`
	// OpenedBy is, while the breaker is open on its own judgement, the
	// failure that opened it: the last failure of an attempt that the
	// breaker counted (an open breaker sends nothing), even when the
	// call it belonged to ended as a refusal. Absent when this pod saw
	// none in the BREAKER_WINDOW before the breaker opened (at
	// BREAKER_SCOPE=fleet, other pods' failures may have opened it).
	OpenedBy *LastError `json:"opened_by,omitempty"`
	// LastError is the last failure of a call that sent a request (its
	// error, redacted, or the failed status it ended with); absent when
	// none. Refusals are not failures: while a breaker refuses, this is
	// still the last failure before it opened.
	LastError *LastError `json:"last_error,omitempty"`
}

// LastError describes the last failed call (or attempt) of a system.
type LastError struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Message string    `json:"message"`
}

// CallRate is the rate of a system's calls that ended over the last
// [RateWindow] (or since the first call, when that is sooner), in calls
// per second.
type CallRate struct {
	// Calls counts every call that ended, refused ones included: an open
	// breaker refusing 100 calls a second reads 100, not 0.
	Calls float64 `json:"calls_per_s"`
	// Refused is the part of Calls refused with no I/O (breaker,
	// bulkhead, budget, rate limit).
	Refused float64 `json:"refused_per_s"`
}

// NextChange is a change of a breaker's state that comes by itself at a
// known time.
type NextChange struct {
	// To is "half-open" (an open breaker lets probes through) or
	// "released" (an operator's override ends: the breaker's own
	// judgement again).
	To string    `json:"to"`
	At time.Time `json:"at"`
	// InMS is the time left from GeneratedAt, in milliseconds rounded
	// up; 0 when it is due.
	InMS int64 `json:"in_ms"`
}

// Released is the NextChange.To of an override's end.
const Released = "released"

// Handler serves the live status page of r: "/" (or the mount point,
// with a trailing slash) is one self-contained HTML page, and
// "status.json" next to it the [Snapshot] the page polls every
// [PollInterval]. Both URLs are relative, so the handler can be mounted
// under a prefix:
//
//	mux.Handle("/debug/outbound/", http.StripPrefix("/debug/outbound", statuspage.Handler(reg, rec)))
//
// rec, the [Recorder] given to registry.WithObserver, supplies the
// latency percentiles, the breaker's last change and the last error; it
// may be nil. The page shows the effective configuration of each system,
// redacted as Status redacts it, so mount it where the configuration may
// be seen (an admin port, not the public one).
func Handler(r *registry.Registry, rec *Recorder) http.Handler {
	return &handler{r: r, rec: rec}
}

type handler struct {
	r   *registry.Registry
	rec *Recorder
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := req.URL.Path
	switch {
	case p == "" || strings.HasSuffix(p, "/"):
		h.servePage(w, req)
	case path.Base(p) == "status.json":
		h.serveJSON(w, req)
	default:
		http.NotFound(w, req)
	}
}

func (h *handler) servePage(w http.ResponseWriter, req *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(page)))
	hd.Set("Content-Security-Policy", pageCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-cache")
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(page)
}

func (h *handler) serveJSON(w http.ResponseWriter, req *http.Request) {
	body, err := json.Marshal(h.Snapshot())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

// Snapshot returns what status.json serves.
func (h *handler) Snapshot() Snapshot {
	// Status first, with no lock of the recorder held: reading a
	// breaker may move it to half-open and call the recorder.
	st := h.r.Status()
	now := time.Now()
	out := Snapshot{GeneratedAt: now, PollIntervalMS: PollInterval.Milliseconds(), Systems: make([]SystemStatus, 0, len(st))}
	if set := h.r.Settings(); set.File != "" {
		out.Settings = &set
	}
	for _, s := range st {
		snap := h.rec.snapshot(s.System)
		ss := SystemStatus{Status: s, Latency: snap.Latency, CallRate: snap.Rate, BudgetTimeouts: snap.BudgetTimeouts}
		if !snap.BreakerAt.IsZero() {
			at := snap.BreakerAt
			ss.BreakerChangedAt = &at
		}
		if l := snap.Last; !l.at.IsZero() {
			ss.LastError = l.shown()
		}
		ss.HalfOpenAt = halfOpenAt(s, snap.BreakerAt)
		ss.NextChange = nextChange(s, ss.HalfOpenAt, now)
		ss.OpenedBy = openedBy(s, snap)
		out.Systems = append(out.Systems, ss)
	}
	return out
}

// shown is f as the page shows it.
func (f failure) shown() *LastError {
	return &LastError{At: f.at, Outcome: f.out.String(), Message: f.message()}
}

// halfOpenAt is when s's open breaker, which opened at opened, turns
// half-open; nil when it is not open on its own judgement or the time
// is not known.
func halfOpenAt(s observe.Status, opened time.Time) *time.Time {
	if s.Breaker != observe.BreakerOpen || s.Forced != nil || opened.IsZero() {
		return nil
	}
	d, ok := setting(s, "BreakerOpenTimeout")
	if !ok {
		return nil
	}
	at := opened.Add(d)
	return &at
}

// nextChange is s's override's end, or else its open breaker's turn to
// half-open (halfOpen), as seen at now; nil when neither.
func nextChange(s observe.Status, halfOpen *time.Time, now time.Time) *NextChange {
	var c NextChange
	switch {
	case s.Forced != nil:
		c = NextChange{To: Released, At: s.Forced.Until}
	case halfOpen != nil:
		c = NextChange{To: string(observe.BreakerHalfOpen), At: *halfOpen}
	default:
		return nil
	}
	if left := c.At.Sub(now); left > 0 {
		c.InMS = int64((left + time.Millisecond - 1) / time.Millisecond)
	}
	return &c
}

// openedBy is the failure that opened s's breaker, open on its own
// judgement: the last failed attempt the recorder saw, unless it came
// more than BREAKER_WINDOW before the breaker opened (it was not in the
// window that tripped it); nil otherwise.
func openedBy(s observe.Status, snap snapshot) *LastError {
	f := snap.Attempt
	if s.Breaker != observe.BreakerOpen || s.Forced != nil || f.at.IsZero() || snap.BreakerAt.IsZero() {
		return nil
	}
	if w, ok := setting(s, "BreakerWindow"); ok && f.at.Before(snap.BreakerAt.Add(-w)) {
		return nil
	}
	return f.shown()
}

// setting is the positive duration of s's setting name (a config.Var's
// Setting), if it has one.
func setting(s observe.Status, name string) (time.Duration, bool) {
	for _, v := range s.Config {
		if v.Setting == name {
			d, err := time.ParseDuration(v.Value)
			return d, err == nil && d > 0
		}
	}
	return 0, false
}

var (
	userinfoRE = regexp.MustCompile(`//[^/?#\s@]+@`)
	secretRE   = regexp.MustCompile(`(?i)([?&][^=&\s]*(?:token|key|secret|pass|pwd|sig|auth|cred|session|code)[^=&\s]*=)[^&\s"]*`)
)

// scrub redacts anything that looks like URL userinfo or a token-like
// query value in an error message. The registry's errors are redacted
// already; this guards against a transport or wrapper error that quotes
// a URL.
func scrub(s string) string {
	s = userinfoRE.ReplaceAllString(s, "//REDACTED@")
	return secretRE.ReplaceAllString(s, "${1}REDACTED")
}
