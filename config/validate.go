package config

import (
	"github.com/outbound-go/outbound/internal/redact"

	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"
)

// validatorSet wraps one validator/v10 instance with the field tags on
// [Client] and the struct-level rules below. One is built per Load call.
type validatorSet struct {
	v *validator.Validate
}

func newValidator() *validatorSet {
	v := validator.New(validator.WithRequiredStructEnabled())
	// Errors name fields by their Go name; messages map them to variables.
	_ = v.RegisterValidation("baseurl", func(fl validator.FieldLevel) bool {
		return baseURLProblem(fl.Field().String()) == ""
	}, true)
	v.RegisterStructValidation(crossRules, Client{})
	return &validatorSet{v: v}
}

// baseURLProblem says what is wrong with a BASE_URL, or "".
func baseURLProblem(s string) string {
	if s == "" {
		return "required: the absolute http(s) URL of the system"
	}
	if redact.UserinfoOutsideAuthority(s) {
		return "the credentials before '@' hold an unencoded '/', '?' or '#', so the URL names the wrong host: percent-encode them in the password (%2F, %3F, %23; '@' is %40); an '@' that belongs to the path or query is written %40"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil && strings.Contains(s, "@"):
		return "not a URL: if the password holds '/', '?', '#', '@' or '%', percent-encode them (%2F, %3F, %23, %40, %25)"
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http or https URL (e.g. https://payments.internal:8443/v1)"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.Port() != "" && !validPort(u.Port()):
		return "port must be 1..65535"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not have a fragment"
	}
	return ""
}

// validPort reports whether p, the digits url.Parse accepted as a port,
// is a port number a connection can use (1..65535).
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// crossRules are the rules between fields. Each is checked only when the
// fields it compares are themselves valid, so one mistake is reported
// once, on the variable to change.
func crossRules(sl validator.StructLevel) {
	c := sl.Current().Interface().(Client)
	pos := func(ds ...time.Duration) bool {
		for _, d := range ds {
			if d <= 0 {
				return false
			}
		}
		return true
	}
	report := func(goName, tag, param string) {
		sl.ReportError(nil, goName, goName, tag, param)
	}
	if pos(c.ConnectTimeout, c.ReadTimeout) && c.ConnectTimeout >= c.ReadTimeout {
		report("ConnectTimeout", "lt_read", formatDuration(c.ReadTimeout))
	}
	if pos(c.ConnectTimeout, c.ReadTimeout, c.CallTimeout) && c.CallTimeout < c.ConnectTimeout+c.ReadTimeout+time.Second {
		report("CallTimeout", "call_sum", formatDuration(c.ConnectTimeout+c.ReadTimeout+time.Second))
	}
	if pos(c.TLSHandshakeTimeout, c.ReadTimeout) && c.TLSHandshakeTimeout > c.ReadTimeout {
		report("TLSHandshakeTimeout", "lte_read", formatDuration(c.ReadTimeout))
	}
	if pos(c.BackoffBase, c.BackoffMax) && c.BackoffBase > c.BackoffMax {
		report("BackoffBase", "lte_backoff_max", formatDuration(c.BackoffMax))
	}
	if pos(c.BulkheadMaxWait, c.CallTimeout) && c.BulkheadMaxWait >= c.CallTimeout {
		report("BulkheadMaxWait", "lt_call", formatDuration(c.CallTimeout))
	}
	// BACKOFF_MAX and RETRY_AFTER_MAX are not bound to CALL_TIMEOUT here:
	// a wait that would pass the call's deadline is never started, so a
	// short CALL_TIMEOUT with the baseline backoff is not an error.
	if c.TLSCAOnly && c.TLSCAFile == "" {
		report("TLSCAOnly", "needs_ca", "")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		if c.TLSCertFile == "" {
			report("TLSCertFile", "cert_pair", "TLS_KEY_FILE")
		} else {
			report("TLSKeyFile", "cert_pair", "TLS_CERT_FILE")
		}
	}
	if c.TLSCertFile != "" && strings.HasPrefix(strings.ToLower(c.BaseURL), "http://") {
		report("TLSCertFile", "cert_https", "")
	}
}

// check validates l.Client and returns its problems, skipping fields in
// skip (they did not parse and are already reported).
func (vs *validatorSet) check(l *Loaded, skip map[string]bool) []Problem {
	err := vs.v.Struct(l.Client)
	var verrs validator.ValidationErrors
	if err == nil || !errors.As(err, &verrs) {
		if err != nil {
			return []Problem{{System: l.Name, Var: l.Prefix + "_*", Rule: err.Error()}}
		}
		return nil
	}
	// A cross rule is not judged against a field that is itself invalid
	// (it did not parse, or broke its own rule): that field's problem is
	// the one to fix, and the comparison would use a value nobody set.
	invalid := make(map[string]bool, len(skip)+len(verrs))
	for k := range skip {
		invalid[k] = true
	}
	for _, fe := range verrs {
		if _, cross := crossRuleFields[fe.Tag()]; !cross {
			invalid[fe.StructField()] = true
		}
	}
	var probs []Problem
	for _, fe := range verrs {
		f, ok := fieldByGoName[fe.StructField()]
		if !ok || skip[f.goName] || comparesInvalid(fe.Tag(), invalid) {
			continue
		}
		probs = append(probs, Problem{
			System: l.Name,
			Var:    l.Prefix + "_" + f.suffix,
			Value:  l.shown(f),
			Source: l.sources[f.index],
			Rule:   ruleText(f, fe.Tag(), fe.Param(), l.Client),
		})
	}
	return probs
}

// crossRuleFields names, for each cross-rule tag, the other fields the
// rule compares the reported field with.
var crossRuleFields = map[string][]string{
	"lt_read":         {"ReadTimeout"},
	"call_sum":        {"ConnectTimeout", "ReadTimeout"},
	"lte_read":        {"ReadTimeout"},
	"lte_backoff_max": {"BackoffMax"},
	"lt_call":         {"CallTimeout"},
	"needs_ca":        nil,
	"cert_pair":       nil,
	"cert_https":      {"BaseURL"},
}

// comparesInvalid reports whether tag is a cross rule that compares with
// a field in invalid.
func comparesInvalid(tag string, invalid map[string]bool) bool {
	for _, name := range crossRuleFields[tag] {
		if invalid[name] {
			return true
		}
	}
	return false
}

// ruleText says in plain words what a failed validator tag asks for.
func ruleText(f *field, tag, param string, c Client) string {
	switch tag {
	case "baseurl":
		return baseURLProblem(c.BaseURL)
	case "gt":
		if strings.HasSuffix(f.suffix, "_TIMEOUT") && (param == "0" || param == "0s") {
			return "must be > 0 (0 or less would mean no timeout, which is never safe)"
		}
		return "must be > " + param
	case "gte":
		return "must be >= " + param
	case "lt":
		return "must be < " + param
	case "lte":
		if f.suffix == "READ_TIMEOUT" {
			return "must be <= " + param + ": a synchronous call should not wait longer for its response; make the call asynchronous (202 Accepted + polling)"
		}
		return "must be <= " + param
	case "min", "max":
		lo, hi := bounds(f)
		return fmt.Sprintf("must be between %s and %s", lo, hi)
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(param), ", ")
	case "hostname_rfc1123":
		return "must be a host name"
	case "lt_read":
		return "must be < READ_TIMEOUT (= " + param + ")"
	case "lte_read":
		return "must be <= READ_TIMEOUT (= " + param + ")"
	case "call_sum":
		return "must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= " + param + ")"
	case "lte_backoff_max":
		return "must be <= BACKOFF_MAX (= " + param + ")"
	case "lt_call":
		return "must be < CALL_TIMEOUT (= " + param + ")"
	case "needs_ca":
		return "needs TLS_CA_FILE: there is no CA bundle to trust alone"
	case "cert_pair":
		return "set together with " + param + " (a client certificate needs both)"
	case "cert_https":
		return "a client certificate needs an https BASE_URL"
	}
	return fmt.Sprintf("breaks rule %s=%s", tag, param)
}

// bounds returns the min and max of an integer field's validate tag.
func bounds(f *field) (lo, hi string) {
	tag := reflect.TypeFor[Client]().Field(f.index).Tag.Get("validate")
	for _, part := range strings.Split(tag, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "min":
			lo = v
		case "max":
			hi = v
		}
	}
	return lo, hi
}
