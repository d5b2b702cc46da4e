package config

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The bounds of a rate limit's settings.
const (
	// MaxRateEvents is the largest N of a RATE_LIMIT N/s, N/m or N/h.
	MaxRateEvents = 1_000_000_000
	// MaxRateBurst is the largest RATE_BURST, and the ceiling of a
	// derived burst. It matches the max of RateBurst's validate tag.
	MaxRateBurst = 100_000
	// burstWindow is how much of the steady rate a derived burst lets go
	// at once: 50 ms worth (1/20 of a second).
	burstWindow = 20
)

// Rate is a parsed RATE_LIMIT with its effective burst: Events requests
// per Per, and Burst requests above the steady rate that may go at once.
// The zero Rate is no limit. A Rate is a plain value, safe to copy and to
// share.
type Rate struct {
	// Events is the number of requests allowed per Per; 0 is no limit.
	Events int
	// Per is the period: time.Second, time.Minute or time.Hour; 0 with no
	// limit.
	Per time.Duration
	// Burst is the number of requests that may go at once above the
	// steady rate: RATE_BURST when it is above 0, otherwise derived from
	// the rate ([DeriveBurst]). 0 with no limit, and in what [ParseRate]
	// returns.
	Burst int
}

// Limited reports whether r limits anything.
func (r Rate) Limited() bool { return r.Events > 0 && r.Per > 0 }

// PerSecond returns the steady rate in requests per second: 200 for
// "200/s", 100 for "6000/m"; 0 with no limit.
func (r Rate) PerSecond() float64 {
	if !r.Limited() {
		return 0
	}
	return float64(r.Events) / r.Per.Seconds()
}

// String renders the rate as RATE_LIMIT spells it: "0", "200/s",
// "6000/m", "1000/h". The burst is not part of it.
func (r Rate) String() string {
	if !r.Limited() {
		return "0"
	}
	unit := "s"
	switch r.Per {
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	}
	return strconv.Itoa(r.Events) + "/" + unit
}

// DeriveBurst returns the burst of a rate whose RATE_BURST is 0: 50 ms
// worth of its steady rate, at least 1 and at most [MaxRateBurst], that
// is max(1, ceil(per second / 20)): 10 for 200/s, 5 for 6000/m, 1 for
// 1000/h. It is 0 with no limit.
func DeriveBurst(r Rate) int {
	if !r.Limited() {
		return 0
	}
	b := math.Ceil(r.PerSecond() / burstWindow)
	return int(max(1, min(b, MaxRateBurst)))
}

// rateRE is the spelling of a rate: a whole number, '/', a period.
var rateRE = regexp.MustCompile(`^([0-9]+)/([smh])$`)

// periods maps the period letter of a rate to its duration.
var periods = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate reads a RATE_LIMIT value: "0" is no limit (the zero Rate),
// and "N/s", "N/m" or "N/h" (N a whole number from 1 to [MaxRateEvents])
// allows N requests a second, a minute or an hour. Surrounding spaces are
// ignored. The burst of the result is 0: [Client.Rate] fills it.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return Rate{}, nil
	}
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return Rate{}, rateSpellingError(s)
	}
	n, err := strconv.Atoi(m[1])
	switch {
	case err != nil || n > MaxRateEvents:
		return Rate{}, errors.New("N is at most " + strconv.Itoa(MaxRateEvents))
	case n == 0:
		return Rate{}, errors.New("0/" + m[2] + " allows nothing: write 0 to turn the limit off")
	}
	return Rate{Events: n, Per: periods[m[2]]}, nil
}

// rateSpellingError says what is wrong with s, a RATE_LIMIT that is not
// spelled N/s, N/m or N/h.
func rateSpellingError(s string) error {
	n, period, found := strings.Cut(s, "/")
	_, nerr := strconv.ParseUint(n, 10, 64)
	switch {
	case !found && nerr == nil:
		return errors.New("the period is missing: write " + s + "/s, " + s + "/m or " + s + "/h")
	case found && nerr == nil:
		return errors.New("the period is s, m or h (100/s, 6000/m, 1000/h), not " + strconv.Quote(period))
	}
	return errors.New("write 0 (off) or a whole number of requests per period: 100/s, 6000/m, 1000/h")
}

// Rate returns the rate limit of c: RATE_LIMIT parsed, with its
// effective burst (RATE_BURST when above 0, otherwise [DeriveBurst]). It
// is the zero Rate when the limit is off, and when RATE_LIMIT does not
// parse (which [Load] reports).
func (c Client) Rate() Rate {
	r, err := ParseRate(c.RateLimit)
	if err != nil || !r.Limited() {
		return Rate{}
	}
	r.Burst = c.RateBurst
	if r.Burst <= 0 {
		r.Burst = DeriveBurst(r)
	}
	return r
}

// rateLimitProblem says what is wrong with c.RateLimit, or "".
func rateLimitProblem(c Client) string {
	if _, err := ParseRate(c.RateLimit); err != nil {
		return "must be 0 (off) or a rate N/s, N/m or N/h: " + err.Error()
	}
	return ""
}
