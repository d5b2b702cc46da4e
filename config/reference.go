package config

import (
	"github.com/outbound-go/outbound/internal/redact"

	"reflect"
	"strconv"
	"strings"
)

// Var is one variable of one system: its documentation and, for a loaded
// system, its effective value.
type Var struct {
	System      string `json:"system"`
	Name        string `json:"name"`    // PAYMENTS_CONNECT_TIMEOUT
	Setting     string `json:"setting"` // ConnectTimeout
	Type        string `json:"type"`    // duration, int, float, bool, string, url
	Default     string `json:"default"` // the system's default, redacted
	Rule        string `json:"rule"`
	Description string `json:"description"`
	Secret      bool   `json:"secret,omitempty"`
	Value       string `json:"value,omitempty"`  // effective value (Vars only), redacted
	Source      string `json:"source,omitempty"` // env, code or baseline (Vars only)
}

// Reference documents every variable of each system, with the system's
// default. Invalid system names are skipped (Load reports them).
func Reference(systems ...System) []Var {
	var out []Var
	for _, s := range systems {
		if checkName(s.Name) != "" {
			continue
		}
		d := reflect.ValueOf(withDefaults(s.Defaults))
		p := Prefix(s.Name)
		for i := range fields().all {
			f := &fields().all[i]
			out = append(out, Var{
				System:      s.Name,
				Name:        p + "_" + f.suffix,
				Setting:     f.goName,
				Type:        f.typ,
				Default:     f.format(d.Field(f.index)),
				Rule:        ruleDoc(f),
				Description: f.desc,
				Secret:      f.secret,
			})
		}
	}
	return out
}

// Vars returns every variable of a loaded system with its value and
// where the value came from: the effective value, or, for a variable of
// the environment, its text as given (a value that did not parse shows
// as written, not as the default it left in place); secrets redacted.
func (l Loaded) Vars() []Var {
	out := Reference(System{Name: l.Name, Defaults: l.defaults})
	for i := range out {
		f := fields().bySuffix[strings.TrimPrefix(out[i].Name, l.Prefix+"_")]
		out[i].Value = redact.Clip(l.shown(f))
		out[i].Source = l.SourceOf(f.suffix).String()
	}
	return out
}

// Summary is one line of a loaded system's main settings, redacted, each
// shown as [Loaded.Vars] shows it (a value that did not parse as given);
// a value holding a control character is shown Go-quoted.
func (l Loaded) Summary() string {
	c := l.Client
	v := func(goName string) string { return l.shown(fields().byGoName[goName]) }
	var b strings.Builder
	b.WriteString(l.Name)
	kv := func(k, val string) { b.WriteString(" " + k + "=" + redact.Show(val)) }
	if base := v("BaseURL"); base == "" {
		b.WriteString(" base=(unset)")
	} else {
		kv("base", base)
	}
	kv("connect", v("ConnectTimeout"))
	kv("tls", v("TLSHandshakeTimeout"))
	kv("read", v("ReadTimeout"))
	kv("call", v("CallTimeout"))
	kv("max_concurrent", v("MaxConcurrent"))
	if c.AdaptiveConcurrency {
		kv("adaptive", v("MinConcurrent")+".."+v("MaxConcurrent"))
	}
	kv("bulkhead_wait", v("BulkheadMaxWait"))
	kv("retries", v("Retries"))
	kv("backoff", v("BackoffBase")+".."+v("BackoffMax"))
	kv("breaker", v("BreakerFailureRatio")+"/"+v("BreakerMinRequests")+" in "+v("BreakerWindow")+" open "+v("BreakerOpenTimeout"))
	kv("redirects", v("FollowRedirects"))
	if c.HedgeDelay != "0" {
		kv("hedge", v("HedgeDelay")+" x"+v("HedgeMax"))
	}
	if r := c.Rate(); r.Limited() {
		kv("rate", v("RateLimit")+" burst "+strconv.Itoa(r.Burst)+" "+v("RateScope")+" wait "+v("RateMaxWait"))
	}
	if c.TLSCertFile != "" {
		kv("mtls", "on")
	}
	return b.String()
}

// formatValue renders a non-duration setting as the environment spells it.
func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return v.String()
	}
	return v.String()
}
