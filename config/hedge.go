package config

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseHedgeDelay reads a HEDGE_DELAY value: "0" is off (both results
// zero), a Go duration ("20ms") a fixed delay, and "p" followed by a
// decimal number from 50 to 99.9 ("p95", "p99.9") a percentile of the
// system's recent attempts. A percentile is written in digits with at most
// one '.': "pNaN", "pInf", "p9e1" and "p0x1p6" parse as floats but are
// refused. It does not compare the delay with READ_TIMEOUT: the validation
// of a [Client] does.
func ParseHedgeDelay(s string) (fixed time.Duration, percentile float64, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutPrefix(s, "p"); ok {
		x, err := strconv.ParseFloat(p, 64)
		if err != nil || !percentileRE.MatchString(p) || !(x >= 50 && x <= 99.9) {
			return 0, 0, errors.New("a percentile is p50 to p99.9 (p95, p99)")
		}
		return 0, x, nil
	}
	if s == "0" {
		return 0, 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, 0, errors.New("not 0, a duration (20ms) or a percentile (p95, p99)")
	case d < 0:
		return 0, 0, errors.New("a delay must be > 0 (0 turns hedging off)")
	}
	return d, 0, nil
}

// percentileRE is the spelling of a percentile after its "p": decimal
// digits with at most one '.', so that the words strconv.ParseFloat also
// reads (NaN, Inf, Infinity), exponents and hex floats are refused.
var percentileRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// hedgeDelayProblem says what is wrong with c.HedgeDelay, or "".
func hedgeDelayProblem(c Client) string {
	d, _, err := ParseHedgeDelay(c.HedgeDelay)
	switch {
	case err != nil:
		return "must be 0 (off), a duration or a percentile: " + err.Error()
	case d >= c.ReadTimeout:
		return "must be < READ_TIMEOUT (= " + formatDuration(c.ReadTimeout) + "): a copy sent after the first attempt timed out is no hedge"
	}
	return ""
}
