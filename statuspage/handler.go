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
// (fields inline) and what the [Recorder] saw.
type SystemStatus struct {
	observe.Status
	// Latency of the recent calls that sent an attempt; null without a
	// recorder or before the first call.
	Latency *Latency `json:"latency"`
	// BreakerChangedAt is the time of the last breaker transition the
	// recorder saw; absent when none.
	BreakerChangedAt *time.Time `json:"breaker_changed_at,omitempty"`
	// HalfOpenAt is when an open breaker lets its first probes through:
	// the breaker's last change plus BREAKER_OPEN_TIMEOUT (at the latest:
	// at BREAKER_SCOPE=fleet another pod may have opened it earlier).
	// Absent unless the breaker is open on its own judgement (an
	// override shows its end in Forced) and the recorder saw it open.
	HalfOpenAt *time.Time `json:"half_open_at,omitempty"`
	// LastError is the last failure of a call that sent a request (its
	// error, redacted, or the failed status it ended with); absent when
	// none. Refusals are not failures: while a breaker refuses, this is
	// still the failure that opened it.
	LastError *LastError `json:"last_error,omitempty"`
}

// LastError describes the last failed call of a system.
type LastError struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Message string    `json:"message"`
}

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
		ss := SystemStatus{Status: s, Latency: snap.Latency}
		if !snap.BreakerAt.IsZero() {
			at := snap.BreakerAt
			ss.BreakerChangedAt = &at
		}
		if l := snap.Last; !l.at.IsZero() {
			ss.LastError = &LastError{At: l.at, Outcome: l.out.String(), Message: l.message()}
		}
		ss.HalfOpenAt = halfOpenAt(s, snap.BreakerAt)
		out.Systems = append(out.Systems, ss)
	}
	return out
}

// halfOpenAt is when s's open breaker, which opened at opened, turns
// half-open; nil when it is not open on its own judgement or the time
// is not known.
func halfOpenAt(s observe.Status, opened time.Time) *time.Time {
	if s.Breaker != observe.BreakerOpen || s.Forced != nil || opened.IsZero() {
		return nil
	}
	for _, v := range s.Config {
		if v.Setting != "BreakerOpenTimeout" {
			continue
		}
		d, err := time.ParseDuration(v.Value)
		if err != nil || d <= 0 {
			return nil
		}
		at := opened.Add(d)
		return &at
	}
	return nil
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
