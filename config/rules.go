package config

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/outbound-go/outbound/internal/redact"
)

// Each rule of a setting is stated once, in the validate tag of its
// [Client] field: validator/v10's own tags (gt, lte, min, max, oneof,
// ltfield, ltefield, required_with, excluded_without, ...) where they say
// it, and custom field tags where they do not (baseurl, callbudget,
// fleetredis, hedgedelay, httpsbase, needsrate, ratelimit). Everything
// else is derived from that tag through ruleTags:
// the check (validator), the message a problem shows (fail), the text of
// the reference that `outbound env`, the ConfigMap and the README's table
// print (doc), and which variable a cross-field problem is reported on
// (blame).

// ruleTag says what one validate tag means in words.
type ruleTag struct {
	// doc describes the rule for the reference: "> 0", "< READ_TIMEOUT".
	doc func(f *field, param string) string
	// fail says what a value that breaks the rule must be.
	fail func(f *field, param string, l *Loaded) string
	// others names (Go names) the other fields a cross-field rule
	// compares with; nil for a rule of the field alone.
	others func(param string) []string
	// blame picks the field to report a broken cross-field rule on and
	// its message; nil reports on the field that holds the tag.
	blame func(f *field, param string, l *Loaded) (*field, string)
}

// ruleTags maps every tag used on Client to its words. A tag missing here
// makes TestRuleTagsKnown fail.
var ruleTags = map[string]ruleTag{
	"omitempty": {doc: func(*field, string) string { return "" }},
	"gt":        {doc: op("> "), fail: mustOp("> ")},
	"gte":       {doc: op(">= "), fail: mustOp(">= ")},
	"lt":        {doc: op("< "), fail: mustOp("< ")},
	"lte":       {doc: op("<= "), fail: mustOp("<= ")},
	// min and max: the reference says "1..10000" once, on min.
	"min": {doc: func(f *field, p string) string { return p + ".." + f.param("max") }, fail: between},
	"max": {doc: func(*field, string) string { return "" }, fail: between},
	"oneof": {
		doc: func(_ *field, p string) string { return "one of " + strings.Join(strings.Fields(p), ", ") },
		fail: func(_ *field, p string, _ *Loaded) string {
			return "must be one of: " + strings.Join(strings.Fields(p), ", ")
		},
	},
	"hostname_rfc1123": {
		doc:  func(*field, string) string { return "a host name" },
		fail: func(*field, string, *Loaded) string { return "must be a host name" },
	},
	"ltfield":  ordered("<", ">"),
	"ltefield": ordered("<=", ">="),
	"gtfield":  ordered(">", "<"),
	"gtefield": ordered(">=", "<="),
	"required_with": {
		doc: func(_ *field, p string) string { return "set together with " + suffixOf(p) },
		fail: func(_ *field, p string, l *Loaded) string {
			return "set together with " + suffixOf(p) + " (a client certificate needs both)"
		},
		others: one,
	},
	"excluded_without": {
		doc: func(_ *field, p string) string { return "needs " + suffixOf(p) },
		fail: func(_ *field, p string, _ *Loaded) string {
			return "needs " + suffixOf(p) + ": there is no CA bundle to trust alone"
		},
		others: one,
	},
	"baseurl": {
		doc:  func(*field, string) string { return "required, absolute http or https URL with a host (port 1..65535)" },
		fail: func(_ *field, _ string, l *Loaded) string { return baseURLProblem(l.Client.BaseURL) },
	},
	"httpsbase": {
		doc:    func(*field, string) string { return "needs an https BASE_URL" },
		fail:   func(*field, string, *Loaded) string { return "a client certificate needs an https BASE_URL" },
		others: func(string) []string { return []string{"BaseURL"} },
	},
	"fleetredis": {
		doc: func(*field, string) string { return "needs " + FleetRedisURLVar + " when fleet" },
		fail: func(*field, string, *Loaded) string {
			return "scope fleet needs " + FleetRedisURLVar + " (the fleet's Redis): set it, or use local"
		},
	},
	"callbudget": {
		doc:    func(*field, string) string { return ">= CONNECT_TIMEOUT + READ_TIMEOUT + 1s" },
		others: func(string) []string { return []string{"ConnectTimeout", "ReadTimeout"} },
		blame:  blameCallBudget,
	},
	"hedgedelay": {
		doc: func(*field, string) string {
			return "0 (off), a duration < READ_TIMEOUT, or a percentile p50..p99.9 (p95)"
		},
		fail:   func(_ *field, _ string, l *Loaded) string { return hedgeDelayProblem(l.Client) },
		others: func(string) []string { return []string{"ReadTimeout"} },
	},
	"ratelimit": {
		doc: func(*field, string) string {
			return "0 (off) or N/s, N/m, N/h (N a whole number, 1.." + strconv.Itoa(MaxRateEvents) + ")"
		},
		fail: func(_ *field, _ string, l *Loaded) string { return rateLimitProblem(l.Client) },
	},
	// needsrate: a value other than the baseline's needs a rate limit
	// (RATE_BURST, RATE_SCOPE=fleet).
	"needsrate": {
		doc: func(f *field, _ string) string { return "other than " + baselineText(f) + " needs RATE_LIMIT > 0" },
		fail: func(_ *field, _ string, l *Loaded) string {
			return "needs a rate limit: " + side(l, fields().byGoName["RateLimit"]) + " is off"
		},
		others: func(string) []string { return []string{"RateLimit"} },
	},
}

// baselineText is the baseline value of f, as the environment spells it.
func baselineText(f *field) string {
	return f.format(reflect.ValueOf(Baseline()).Field(f.index))
}

// validate is the one validator of every Load, built on first use; a
// validator.Validate is safe for concurrent use and caches each struct.
var validate = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// The custom tags are field rules that read the struct they are in.
	custom := map[string]validator.Func{
		"baseurl": func(fl validator.FieldLevel) bool { return baseURLProblem(fl.Field().String()) == "" },
		"httpsbase": func(fl validator.FieldLevel) bool {
			base := fl.Parent().FieldByName("BaseURL").String()
			return fl.Field().String() == "" || !strings.HasPrefix(strings.ToLower(base), "http://")
		},
		"callbudget": func(fl validator.FieldLevel) bool {
			c := fl.Parent().Interface().(Client)
			return c.CallTimeout >= c.ConnectTimeout+c.ReadTimeout+time.Second
		},
		"hedgedelay": func(fl validator.FieldLevel) bool {
			return hedgeDelayProblem(fl.Parent().Interface().(Client)) == ""
		},
		"ratelimit": func(fl validator.FieldLevel) bool {
			return rateLimitProblem(fl.Parent().Interface().(Client)) == ""
		},
		"needsrate": func(fl validator.FieldLevel) bool {
			base := reflect.ValueOf(Baseline()).FieldByName(fl.StructFieldName())
			return fl.Field().Equal(base) || fl.Parent().Interface().(Client).Rate().Limited()
		},
	}
	for tag, fn := range custom {
		if err := v.RegisterValidation(tag, fn, true); err != nil {
			panic(err) // a programming error: the tags are constant
		}
	}
	// fleetredis reads what the struct does not hold: whether the load
	// has a fleet Redis (OUTBOUND_FLEET_REDIS_URL), from check's context.
	fleetRedis := func(ctx context.Context, fl validator.FieldLevel) bool {
		has, _ := ctx.Value(fleetRedisKey{}).(bool)
		return fl.Field().String() != "fleet" || has
	}
	if err := v.RegisterValidationCtx("fleetredis", fleetRedis, true); err != nil {
		panic(err)
	}
	return v
})

// fleetRedisKey carries, in check's context, whether the load has a
// fleet Redis.
type fleetRedisKey struct{}

// check validates l.Client and returns its problems, skipping fields in
// skip (Go names: they did not parse and are already reported).
func check(l *Loaded, skip map[string]bool) []Problem {
	ctx := context.WithValue(context.Background(), fleetRedisKey{}, l.fleetRedis)
	err := validate().StructCtx(ctx, l.Client)
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
		if ruleTags[fe.Tag()].others == nil {
			invalid[fe.StructField()] = true
		}
	}
	var probs []Problem
	for _, fe := range verrs {
		f, ok := fields().byGoName[fe.StructField()]
		if !ok || skip[f.goName] {
			continue
		}
		rt, param := ruleTags[fe.Tag()], fe.Param()
		if rt.others != nil && anyOf(rt.others(param), invalid) {
			continue
		}
		target, msg := f, ""
		switch {
		case rt.blame != nil:
			target, msg = rt.blame(f, param, l)
		case rt.fail != nil:
			msg = rt.fail(f, param, l)
		default:
			msg = fmt.Sprintf("breaks rule %s=%s", fe.Tag(), param)
		}
		if f.why.tag == fe.Tag() {
			msg += ": " + f.why.param
		}
		probs = append(probs, Problem{
			System: l.Name,
			Var:    l.Prefix + "_" + target.suffix,
			Value:  l.shown(target),
			Source: l.sources[target.index],
			Rule:   msg,
		})
	}
	return probs
}

func anyOf(names []string, set map[string]bool) bool {
	for _, n := range names {
		if set[n] {
			return true
		}
	}
	return false
}

func one(p string) []string { return []string{p} }

// suffixOf names a field, given by its Go name, by its variable suffix.
func suffixOf(goName string) string {
	if f, ok := fields().byGoName[goName]; ok {
		return f.suffix
	}
	return goName
}

func op(sym string) func(*field, string) string {
	return func(_ *field, p string) string { return sym + p }
}

func mustOp(sym string) func(*field, string, *Loaded) string {
	return func(f *field, p string, _ *Loaded) string {
		if sym == "> " && f.typ == "duration" && strings.HasSuffix(f.suffix, "_TIMEOUT") && (p == "0" || p == "0s") {
			return "must be > 0 (0 or less would mean no timeout, which is never safe)"
		}
		return "must be " + sym + p
	}
}

func between(f *field, _ string, _ *Loaded) string {
	return fmt.Sprintf("must be between %s and %s", f.param("min"), f.param("max"))
}

// side shows a field of l as the other side of a rule:
// "READ_TIMEOUT (= 10s, baseline default)".
func side(l *Loaded, f *field) string {
	return fmt.Sprintf("%s (= %s)", f.suffix, valueAndSource(l, f))
}

// valueAndSource is "10s, baseline default", "5s, env".
func valueAndSource(l *Loaded, f *field) string {
	src := "env"
	if s := l.sources[f.index]; s != FromEnv {
		src = s.String() + " default"
	}
	return redact.Show(l.shown(f)) + ", " + src
}

// ordered is a comparison of two fields, this sym other; seen from the
// other side it reads other inv this. It is reported on the side the
// operator set: the other field when its source is stronger (env over
// code over baseline), so READ_TIMEOUT=1ns is reported on READ_TIMEOUT,
// not on a CONNECT_TIMEOUT left at its baseline.
func ordered(sym, inv string) ruleTag {
	return ruleTag{
		doc:    func(_ *field, p string) string { return sym + " " + suffixOf(p) },
		others: one,
		blame: func(f *field, p string, l *Loaded) (*field, string) {
			o := fields().byGoName[p]
			if l.sources[o.index] > l.sources[f.index] {
				return o, "must be " + inv + " " + side(l, f)
			}
			return f, "must be " + sym + " " + side(l, o)
		},
	}
}

// blameCallBudget reports CALL_TIMEOUT >= CONNECT_TIMEOUT + READ_TIMEOUT
// + 1s on the one of the three with the strongest source, CALL_TIMEOUT
// first on a tie, then READ_TIMEOUT.
func blameCallBudget(call *field, _ string, l *Loaded) (*field, string) {
	conn, read := fields().byGoName["ConnectTimeout"], fields().byGoName["ReadTimeout"]
	c := l.Client
	target := call
	for _, f := range []*field{read, conn} {
		if l.sources[f.index] > l.sources[target.index] {
			target = f
		}
	}
	bound := func(expr string, d time.Duration, a, b *field) string {
		return fmt.Sprintf("%s (= %s; %s = %s; %s = %s)", expr, formatDuration(d),
			a.suffix, valueAndSource(l, a), b.suffix, valueAndSource(l, b))
	}
	switch target {
	case call:
		return call, "must be >= " + bound("CONNECT_TIMEOUT + READ_TIMEOUT + 1s", c.ConnectTimeout+c.ReadTimeout+time.Second, conn, read)
	case read:
		return read, "must be <= " + bound("CALL_TIMEOUT - CONNECT_TIMEOUT - 1s", c.CallTimeout-c.ConnectTimeout-time.Second, call, conn)
	default:
		return conn, "must be <= " + bound("CALL_TIMEOUT - READ_TIMEOUT - 1s", c.CallTimeout-c.ReadTimeout-time.Second, call, read)
	}
}

// ruleDoc is the reference text of f's rules, derived from its validate
// and file tags: "> 0, < READ_TIMEOUT".
func ruleDoc(f *field) string {
	var parts []string
	if f.typ == "bool" {
		parts = append(parts, "true or false")
	}
	for _, r := range f.rules {
		if s := ruleTags[r.tag].doc(f, r.param); s != "" {
			parts = append(parts, s)
		}
	}
	if f.file != "" {
		parts = append(parts, fileDoc[f.file])
	}
	if len(parts) == 0 {
		return f.typ
	}
	return strings.Join(parts, ", ")
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
	case redact.IsHostPort(s):
		return "the scheme is missing: start it with https:// or http://"
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
