package config

import (
	"github.com/outbound-go/outbound/internal/redact"

	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Client holds the settings of one external system. The zero value is not
// valid: start from [Baseline] or let [Load] fill it.
//
// Every field is read from the variable <PREFIX>_<NAME>, where envconfig
// names NAME after the field (split_words: ConnectTimeout reads
// CONNECT_TIMEOUT; an envconfig tag where an acronym would split wrongly).
// Its rules are stated once, in its validate tag (validator/v10 syntax,
// plus the custom tags baseurl, callbudget, fleetredis, hedgedelay,
// httpsbase, needsrate and ratelimit; see rules.go), and its TLS file kind in its file tag:
// validation, problem messages, `outbound env`, the generated ConfigMap
// and the README's table are all derived from them. The baseline of each field is in [Baseline].
type Client struct {
	// BaseURL is the absolute http or https URL that relative request URLs
	// resolve against. Required; userinfo and token-like query parameters
	// are redacted in every report.
	BaseURL string `split_words:"true" validate:"baseurl" secret:"url" desc:"absolute http(s) URL of the system; relative request paths resolve against it"`

	// ConnectTimeout bounds the TCP handshake (net.Dialer.Timeout).
	// Baseline 2s: one data centre. Use ~5s over the internet.
	ConnectTimeout time.Duration `split_words:"true" validate:"gt=0,ltfield=ReadTimeout" desc:"bound on the TCP connect"`

	// TLSHandshakeTimeout bounds the TLS handshake. Baseline 3s.
	TLSHandshakeTimeout time.Duration `split_words:"true" validate:"gt=0,ltefield=ReadTimeout" desc:"bound on the TLS handshake"`

	// ReadTimeout bounds the wait for the response headers once the
	// request is written (Transport.ResponseHeaderTimeout). Baseline 10s,
	// a fast API; 30s for heavy ones; never more than 60s.
	ReadTimeout time.Duration `split_words:"true" validate:"gt=0,lte=60s" desc:"bound on the wait for response headers; a longer wait is a job for an asynchronous call (202 + polling)" why:"lte:a synchronous call should not wait longer for its response; make the call asynchronous (202 Accepted + polling)"`

	// CallTimeout bounds the whole call, retries and body read included,
	// like http.Client.Timeout. A shorter caller deadline always wins.
	// Baseline 15s.
	CallTimeout time.Duration `split_words:"true" validate:"gt=0,callbudget" desc:"bound on the whole call, retries and body included"`

	// IdleConnTimeout closes pooled connections idle for this long.
	// Baseline 90s.
	IdleConnTimeout time.Duration `split_words:"true" validate:"gt=0,lte=10m" desc:"how long an idle pooled connection is kept"`

	// MaxConcurrent is the bulkhead: calls in flight at once. It also
	// sizes the connection pool (MaxIdleConnsPerHost and MaxConnsPerHost).
	// Baseline 32.
	MaxConcurrent int `split_words:"true" validate:"min=1,max=10000" desc:"calls in flight at once (bulkhead); also sizes the connection pool"`

	// BulkheadMaxWait is how long a call waits for a free slot when
	// MaxConcurrent calls are in flight. 0 (the baseline) rejects at once
	// with bulkhead.ErrFull. The wait counts against CallTimeout.
	BulkheadMaxWait time.Duration `split_words:"true" validate:"gte=0,ltfield=CallTimeout" desc:"how long a call waits for a bulkhead slot; 0 rejects at once"`

	// AdaptiveConcurrency lets the bulkhead's limit move between
	// MinConcurrent and MaxConcurrent with the latency measured per call:
	// it shrinks when latency rises above the best seen or calls fail,
	// and grows while there is no queueing. MaxConcurrent stays the
	// ceiling and still sizes the pool. Baseline false: a fixed limit.
	AdaptiveConcurrency bool `split_words:"true" desc:"adapt the bulkhead's limit to measured latency, between MIN_CONCURRENT and MAX_CONCURRENT"`

	// MinConcurrent is the floor of the adaptive limit: it never admits
	// fewer calls at once. Read only when AdaptiveConcurrency is true.
	// Baseline 1.
	MinConcurrent int `split_words:"true" validate:"min=1,max=10000,ltefield=MaxConcurrent" desc:"floor of the adaptive bulkhead limit (with ADAPTIVE_CONCURRENCY)"`

	// Retries is the number of retries after the first attempt, for
	// requests that are safe to replay. Baseline 2. For a system that
	// never retries, start its [System].Defaults from [Baseline] and set
	// Retries to 0.
	Retries int `split_words:"true" validate:"min=0,max=10" desc:"retries after the first attempt (idempotent requests only)"`

	// BackoffBase is the first retry's backoff ceiling; it doubles per
	// retry up to BackoffMax, with full jitter. Baseline 100ms.
	BackoffBase time.Duration `split_words:"true" validate:"gt=0,ltefield=BackoffMax" desc:"backoff before the first retry (doubles, full jitter)"`

	// BackoffMax caps the backoff. Baseline 2s.
	BackoffMax time.Duration `split_words:"true" validate:"gt=0" desc:"cap on the backoff between retries"`

	// RetryAfterMax is the longest Retry-After the client honours; a
	// longer hint ends the call with the response instead of waiting.
	// Baseline 10s.
	RetryAfterMax time.Duration `split_words:"true" validate:"gt=0" desc:"longest Retry-After hint honoured; longer hints end the call"`

	// OmitTimeBudget stops the client from sending X-Time-Budget (the
	// milliseconds left of the call) on each attempt. Set it for third
	// parties, who have no use for an internal budget. Baseline false.
	OmitTimeBudget bool `split_words:"true" desc:"do not send X-Time-Budget (e.g. to third parties)"`

	// RetryBudgetRatio caps retries at this fraction of recent calls, so
	// retries cannot turn an outage into a storm. Baseline 0.2.
	RetryBudgetRatio float64 `split_words:"true" validate:"gt=0,lte=1" desc:"retries allowed as a fraction of recent calls"`

	// RetryBudgetMinPerSec is the floor of retries per second always
	// allowed by the retry throttle. Baseline 10.
	RetryBudgetMinPerSec int `split_words:"true" validate:"min=0,max=10000" desc:"retries per second always allowed by the retry throttle"`

	// HedgeDelay turns hedging on: once an attempt of a request that is
	// safe to send twice has waited this long without an answer, a copy is
	// sent on another connection and the first answer the caller should
	// see wins. "0" (the baseline) is off; a duration ("20ms") must be
	// below ReadTimeout; a percentile of the system's recent attempts
	// ("p95", "p99"; p50 to p99.9) is kept between HedgeDelayMin and
	// HedgeDelayMax. Each copy takes a retry-budget token and a bulkhead
	// permit without waiting, or is not sent.
	HedgeDelay string `split_words:"true" validate:"hedgedelay" desc:"send a copy of a replayable attempt that has not answered after this long (hedging)"`

	// HedgeMax is the number of copies at most sent beside one attempt,
	// one more each HedgeDelay. Baseline 1.
	HedgeMax int `split_words:"true" validate:"min=1,max=3" desc:"extra copies of one attempt at most (hedging)"`

	// HedgeDelayMin is the floor of a percentile HedgeDelay, so a run of
	// fast answers cannot make it zero. Baseline 5ms.
	HedgeDelayMin time.Duration `split_words:"true" validate:"gt=0,ltefield=HedgeDelayMax" desc:"floor of a percentile HEDGE_DELAY"`

	// HedgeDelayMax is the ceiling of a percentile HedgeDelay (also its
	// value until 20 attempts have answered), so an outage cannot make it
	// huge; ReadTimeout caps it too. Baseline 1s.
	HedgeDelayMax time.Duration `split_words:"true" validate:"gt=0" desc:"ceiling of a percentile HEDGE_DELAY, and its value on a cold start"`

	// BreakerFailureRatio opens the breaker when this fraction of the
	// attempts in the window failed. Baseline 0.5.
	BreakerFailureRatio float64 `split_words:"true" validate:"gt=0,lte=1" desc:"failure ratio in the window that opens the breaker"`

	// BreakerMinRequests is the number of attempts in the window before
	// the ratio is judged. Baseline 20.
	BreakerMinRequests int `split_words:"true" validate:"min=1,max=100000" desc:"attempts in the window before the failure ratio counts"`

	// BreakerWindow is the rolling window the ratio is computed over, in
	// ten buckets. Baseline 30s.
	BreakerWindow time.Duration `split_words:"true" validate:"gte=1s,lte=1h" desc:"rolling window of the failure ratio (10 buckets)"`

	// BreakerOpenTimeout is how long the breaker stays open before it lets
	// probes through (half-open). Baseline 15s.
	BreakerOpenTimeout time.Duration `split_words:"true" validate:"gt=0,lte=1h" desc:"time open before probes are let through"`

	// BreakerHalfOpenProbes is the number of probes let through when
	// half-open; that many successes close the breaker, one failure opens
	// it again. Baseline 3.
	BreakerHalfOpenProbes int `split_words:"true" validate:"min=1,max=1000" desc:"probes let through when half-open; all must succeed to close"`

	// BreakerScope is where the breaker's evidence and state live: "local"
	// (the baseline: this pod alone decides) or "fleet" (shared with every
	// pod of the service through the Redis of OUTBOUND_FLEET_REDIS_URL, by
	// the module github.com/outbound-go/outbound/fleet; each pod still
	// decides locally, and alone when Redis fails).
	BreakerScope string `split_words:"true" validate:"oneof=local fleet,fleetredis" desc:"local: this pod's breaker decides alone; fleet: evidence and state shared with every pod over Redis"`

	// RateLimit is the quota of requests sent to the system: "0" (the
	// baseline: no limit) or a rate, N requests a second, a minute or an
	// hour ("200/s", "6000/m", "1000/h"; N from 1 to [MaxRateEvents]).
	// Every request that leaves counts: first attempts, retries, hedges
	// and half-open probes each take a token. [Client.Rate] returns it
	// parsed, with its burst.
	RateLimit string `split_words:"true" validate:"ratelimit" desc:"requests sent to the system at most, per second, minute or hour (every attempt counts); 0 is no limit"`

	// RateBurst is the number of requests above the steady rate that may
	// go at once. 0 (the baseline) derives it from RateLimit: 50 ms worth
	// of the rate, max(1, ceil(per second / 20)), at most
	// [MaxRateBurst]: 10 for 200/s ([DeriveBurst]). Any other value needs
	// a RateLimit.
	RateBurst int `split_words:"true" validate:"min=0,max=100000,needsrate" desc:"requests above the steady rate that may go at once; 0 derives it: max(1, ceil(rate per second / 20))"`

	// RateScope is where the quota lives: "local" (the baseline: each pod
	// has the whole RateLimit to itself) or "fleet" (RateLimit is shared
	// by every pod of the service through the Redis of
	// OUTBOUND_FLEET_REDIS_URL, each pod spending from a share granted in
	// the background). "fleet" needs OUTBOUND_FLEET_REDIS_URL and a
	// RateLimit.
	RateScope string `split_words:"true" validate:"oneof=local fleet,fleetredis,needsrate" desc:"local: each pod has the whole RATE_LIMIT; fleet: RATE_LIMIT is shared by every pod over Redis"`

	// RateMaxWait is how long a request may wait for its token when the
	// quota is spent. 0 (the baseline) refuses it at once with
	// registry.ErrRateLimited. A wait never outlasts the call's deadline;
	// it must be below CallTimeout.
	RateMaxWait time.Duration `split_words:"true" validate:"gte=0,ltfield=CallTimeout" desc:"how long a request may wait for its rate-limit token; 0 refuses at once"`

	// FollowRedirects is the redirect policy: "none", "same-host" (the
	// baseline: only to the same scheme and host) or "any".
	FollowRedirects string `split_words:"true" validate:"oneof=none same-host any" desc:"redirect policy: none, same-host or any"`

	// MaxRedirects caps the redirects followed in one call. Baseline 3.
	MaxRedirects int `split_words:"true" validate:"min=0,max=20" desc:"redirects followed in one call at most"`

	// TLSCAFile is a PEM bundle of CAs trusted in addition to the system
	// roots (or alone, with TLSCAOnly). Empty: system roots only.
	TLSCAFile string `envconfig:"TLS_CA_FILE" file:"ca" desc:"PEM bundle of extra trusted CAs"`

	// TLSCAOnly trusts TLSCAFile alone instead of adding it to the system
	// roots. Baseline false.
	TLSCAOnly bool `envconfig:"TLS_CA_ONLY" validate:"excluded_without=TLSCAFile" desc:"trust TLS_CA_FILE alone, not the system roots"`

	// TLSCertFile and TLSKeyFile are the client certificate and key for
	// mTLS, both or neither. They are re-read when the files change.
	TLSCertFile string `split_words:"true" validate:"required_with=TLSKeyFile,httpsbase" file:"cert" desc:"client certificate (PEM) for mTLS"`
	TLSKeyFile  string `split_words:"true" validate:"required_with=TLSCertFile" file:"key" desc:"client private key (PEM) for mTLS"`

	// TLSServerName overrides the name used for SNI and verification.
	TLSServerName string `split_words:"true" validate:"omitempty,hostname_rfc1123" desc:"name for SNI and certificate verification"`

	// TLSMinVersion is the lowest TLS version accepted: "1.2" (baseline)
	// or "1.3".
	TLSMinVersion string `split_words:"true" validate:"oneof=1.2 1.3" desc:"lowest TLS version accepted"`

	// FaultAbortRatio is the fraction of attempts (0..1) that fault
	// injection answers with FaultAbortStatus without reaching the
	// upstream, for drills. Baseline 0; any other value needs
	// OUTBOUND_FAULTS=on (see docs/fault-drills.md).
	FaultAbortRatio float64 `split_words:"true" validate:"gte=0,lte=1" desc:"drills: fraction of attempts answered with FAULT_ABORT_STATUS without reaching the system; needs OUTBOUND_FAULTS=on"`

	// FaultAbortStatus is the status of an aborted attempt. Baseline 503.
	FaultAbortStatus int `split_words:"true" validate:"min=400,max=599" desc:"drills: status of an injected abort; needs OUTBOUND_FAULTS=on"`

	// FaultDelay is how long fault injection holds a delayed attempt
	// before sending it. Baseline 0. The delay stands for a slow
	// upstream: it counts against READ_TIMEOUT (a delay that reaches it
	// ends the attempt as a read timeout) and against the call's deadline.
	FaultDelay time.Duration `split_words:"true" validate:"gte=0,lte=10m" desc:"drills: delay before an attempt is sent; counts against READ_TIMEOUT; needs OUTBOUND_FAULTS=on"`

	// FaultDelayRatio is the fraction of attempts (0..1) delayed by
	// FaultDelay. Baseline 0.
	FaultDelayRatio float64 `split_words:"true" validate:"gte=0,lte=1" desc:"drills: fraction of attempts delayed by FAULT_DELAY; needs OUTBOUND_FAULTS=on"`

	// whole is set by [Baseline]: a Client that starts from it is taken
	// whole as [System].Defaults, zero fields included.
	whole bool
}

// Baseline returns the settings every system starts from. Deviations are
// declared per system in [System].Defaults, with a comment saying why;
// start from Baseline to write any value, zero included:
//
//	d := config.Baseline()
//	d.Retries = 0 // payments: a POST is never replayed
//	config.System{Name: "payments", Defaults: d}
func Baseline() Client {
	return Client{
		whole:                 true,
		ConnectTimeout:        2 * time.Second,
		TLSHandshakeTimeout:   3 * time.Second,
		ReadTimeout:           10 * time.Second,
		CallTimeout:           15 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxConcurrent:         32,
		BulkheadMaxWait:       0,
		MinConcurrent:         1,
		Retries:               2,
		BackoffBase:           100 * time.Millisecond,
		BackoffMax:            2 * time.Second,
		RetryAfterMax:         10 * time.Second,
		RetryBudgetRatio:      0.2,
		RetryBudgetMinPerSec:  10,
		HedgeDelay:            "0",
		HedgeMax:              1,
		HedgeDelayMin:         5 * time.Millisecond,
		HedgeDelayMax:         time.Second,
		BreakerFailureRatio:   0.5,
		BreakerMinRequests:    20,
		BreakerWindow:         30 * time.Second,
		BreakerOpenTimeout:    15 * time.Second,
		BreakerHalfOpenProbes: 3,
		BreakerScope:          "local",
		RateLimit:             "0",
		RateScope:             "local",
		FollowRedirects:       "same-host",
		MaxRedirects:          3,
		TLSMinVersion:         "1.2",
		FaultAbortStatus:      503,
	}
}

// System declares one external system: its name and the defaults it uses
// where its environment says nothing.
//
// Defaults built from [Baseline] are taken whole: every field is what it
// says, 0 included (Retries: 0 means no retries). A Client written as a
// literal (config.Client{ConnectTimeout: 5 * time.Second}) is laid over
// the baseline field by field instead: its zero fields take the baseline,
// so it cannot say 0. The zero Defaults is the baseline.
type System struct {
	// Name is lower case letters, digits, '-' and '_', starting with a
	// letter, at most 63 bytes. The prefix of its variables is the name in
	// upper snake case: "order-history" reads ORDER_HISTORY_*.
	Name string
	// Defaults override the baseline for this system.
	Defaults Client
	// Routes are the system's operations with settings of their own
	// (see [Route]); <P>_ROUTES declares more, and the environment
	// overrides these setting by setting.
	Routes []Route
}

// withDefaults returns the settings a system starts from: d itself when
// it was built from [Baseline], otherwise the baseline with every
// non-zero field of d laid over it.
func withDefaults(d Client) Client {
	if d.whole {
		return d
	}
	out := Baseline()
	ov, dv := reflect.ValueOf(&out).Elem(), reflect.ValueOf(d)
	for i := range fields().all {
		if f := dv.Field(fields().all[i].index); !f.IsZero() {
			ov.Field(fields().all[i].index).Set(f)
		}
	}
	return out
}

// codeSources marks in sources (by field table index) the fields that
// d, a System.Defaults, sets: those that differ from the baseline when d
// was built from it, the non-zero ones otherwise.
func codeSources(d Client, sources []Source) {
	dv := reflect.ValueOf(&d).Elem()
	ref := Client{} // a literal sets what is not zero
	if d.whole {
		ref = Baseline() // a whole Defaults sets what is not the baseline
	}
	rv := reflect.ValueOf(&ref).Elem()
	for i := range fields().all {
		if j := fields().all[i].index; !dv.Field(j).Equal(rv.Field(j)) {
			sources[i] = FromCode
		}
	}
}

// String renders the settings as {BaseURL:… ConnectTimeout:2s …}, BaseURL
// redacted and control characters quoted, so that printing a Client (%v,
// %+v) never shows credentials nor forges a line.
func (c Client) String() string {
	v := reflect.ValueOf(c)
	var b strings.Builder
	b.WriteByte('{')
	for i := range fields().all {
		f := &fields().all[i]
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.goName)
		b.WriteByte(':')
		b.WriteString(redact.Show(f.format(v.Field(f.index))))
	}
	b.WriteByte('}')
	return b.String()
}

// GoString is String, so that %#v does not show credentials either.
func (c Client) GoString() string { return c.String() }

// LogValue makes slog log a Client with BaseURL redacted.
func (c Client) LogValue() slog.Value {
	return slog.StringValue(c.String())
}

// MarshalJSON renders the settings as an object keyed by variable suffix
// (CONNECT_TIMEOUT), each value spelled as the environment spells it
// ("2s"), secrets redacted: json.Marshal of a Client, or of anything
// holding one, never shows credentials.
func (c Client) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(c)
	var b []byte
	b = append(b, '{')
	for i := range fields().all {
		f := &fields().all[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.suffix)
		b = append(b, ':')
		b = strconv.AppendQuote(b, f.format(v.Field(f.index)))
	}
	return append(b, '}'), nil
}
