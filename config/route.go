package config

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Routes give the operations of one system policies of their own: a
// POST that must never be retried and may take 30s beside a GET that is
// fast and safely retried, a search endpoint with a smaller rate limit, a
// slow export that must not trip the breaker guarding checkout. They share
// the system's upstream: its connection settings, pool and bulkhead.
//
// A system's routes are named in <P>_ROUTES (create-charge,get-charge;
// the name rule of systems) and/or declared in code ([System].Routes).
// Route R reads <P>_ROUTE_<R>_<SETTING>, R in upper snake case:
// create-charge reads PAYMENTS_ROUTE_CREATE_CHARGE_MATCH. The environment
// overrides the code, setting by setting, as for systems.
const (
	// RoutesSuffix is the suffix of a system's list of routes:
	// PAYMENTS_ROUTES.
	RoutesSuffix = "ROUTES"
	// routeInfix starts the suffix of a route's settings:
	// PAYMENTS_ROUTE_<R>_MATCH.
	routeInfix = "ROUTE_"
)

// Route declares one operation of a system with settings of its own. The
// zero value of a setting is the system's: a route says only what differs.
// It is plain data, safe to copy.
type Route struct {
	// Name is the route's name: lower case letters, digits, '-' and '_',
	// starting with a letter ("create-charge").
	Name string
	// Match is the pattern of the requests the route covers, in the
	// syntax of net/http's ServeMux without a host: "POST /v1/charges",
	// "GET /v1/charges/{id}", "/v1/files/{path...}". It is matched
	// against the method and the absolute path a request is sent with;
	// the most specific pattern wins, by ServeMux's precedence. Required.
	Match string
	// ReadTimeout bounds the wait for the response headers of each of
	// the route's attempts. 0: the system's READ_TIMEOUT.
	ReadTimeout time.Duration
	// CallTimeout bounds the route's whole calls. 0: the system's.
	CallTimeout time.Duration
	// Retries is the route's retries after the first attempt; nil: the
	// system's (new(0): never retried).
	Retries *int
	// Idempotent makes the route's requests replayable whatever their
	// method (retried and hedged, the body replayed through GetBody), for
	// an API that dedupes them itself. false: the method and the
	// Idempotency-Key header decide, as for the system.
	Idempotent bool
	// HedgeDelay is the route's HEDGE_DELAY ("0": off, "20ms", "p95");
	// "": the system's.
	HedgeDelay string
	// RateLimit is a limit of the route's own, inside the system's: a
	// request takes a token of both ("30/m"). "": none of its own.
	RateLimit string
	// Breaker is "system" (the default: the route shares the system's
	// breaker) or "own" (a breaker of its own, so that one failing
	// operation does not refuse the others).
	Breaker string
}

// LoadedRoute is one route as loaded: what its calls run on.
type LoadedRoute struct {
	// Name is the route's name; Prefix its variables' prefix
	// (PAYMENTS_ROUTE_CREATE_CHARGE).
	Name, Prefix string
	// Match is the route's ServeMux pattern.
	Match string
	// Client is the system's settings with the route's laid over them:
	// READ_TIMEOUT, CALL_TIMEOUT, RETRIES and HEDGE_DELAY are the
	// route's; RATE_LIMIT is the route's own limit ("0": none), and
	// every other field the system's.
	Client Client
	// Idempotent: the route's requests are replayable whatever their
	// method.
	Idempotent bool
	// OwnBreaker: the route has a breaker of its own.
	OwnBreaker bool
}

// Rate returns the route's own limit with its derived burst; the zero
// Rate when it has none.
func (r LoadedRoute) Rate() Rate {
	rate, err := ParseRate(r.Client.RateLimit)
	if err != nil || !rate.Limited() {
		return Rate{}
	}
	rate.Burst = DeriveBurst(rate)
	return rate
}

// routeSetting is one setting a route may have: a field of [Client]
// (goName) or one of its own.
type routeSetting struct {
	suffix string
	goName string // the Client field it overrides; "" for MATCH, IDEMPOTENT, BREAKER
	typ    string
	rule   string
	desc   string
}

// routeSettings is every setting of a route, in the order the reference
// lists them. The rules of the Client fields are the system's, judged on
// the route's settings with the system's connect timeout.
var routeSettings = []routeSetting{
	{suffix: "MATCH", typ: "string", rule: "a ServeMux pattern without a host: [METHOD ]/path, {name} and {name...} wildcards; needed by every declared route",
		desc: "the requests the route covers, by method and absolute path; the most specific pattern wins"},
	{suffix: "READ_TIMEOUT", goName: "ReadTimeout", typ: "duration", rule: "as the system's READ_TIMEOUT", desc: "the route's wait for response headers"},
	{suffix: "CALL_TIMEOUT", goName: "CallTimeout", typ: "duration", rule: "as the system's CALL_TIMEOUT", desc: "the route's bound on a whole call"},
	{suffix: "RETRIES", goName: "Retries", typ: "int", rule: "as the system's RETRIES", desc: "the route's retries after the first attempt"},
	{suffix: "IDEMPOTENT", typ: "bool", rule: "true or false", desc: "true: the route's requests are replayable whatever their method"},
	{suffix: "HEDGE_DELAY", goName: "HedgeDelay", typ: "string", rule: "as the system's HEDGE_DELAY", desc: "the route's hedging"},
	{suffix: "RATE_LIMIT", goName: "RateLimit", typ: "string", rule: "0 or N/s, N/m, N/h, at most the system's RATE_LIMIT", desc: "a limit of the route's own, inside the system's"},
	{suffix: "BREAKER", typ: "string", rule: "one of system, own", desc: "system: the route shares the system's breaker; own: a breaker of its own"},
}

func routeSettingOf(suffix string) *routeSetting {
	for i := range routeSettings {
		if routeSettings[i].suffix == suffix {
			return &routeSettings[i]
		}
	}
	return nil
}

// routeList is a system's declared routes, code first, then <P>_ROUTES.
type routeList struct {
	routes []Route
	probs  []Problem
}

// declareRoutes declares the routes of s: those of code, then those of
// env's <P>_ROUTES that code did not.
func declareRoutes(s System, prefix string, env map[string]string) routeList {
	var d routeList
	listVar := prefix + "_" + RoutesSuffix
	seen := map[string]bool{}
	byPrefix := map[string]string{}
	add := func(r Route, where string, src Source) {
		if msg := checkName(r.Name); msg != "" {
			msg = strings.Replace(msg, "system name", "route name", 1)
			d.probs = append(d.probs, Problem{System: s.Name, Var: where, Value: r.Name, Source: src, Rule: msg})
			return
		}
		p := Prefix(r.Name)
		if other, dup := byPrefix[p]; dup {
			rule := fmt.Sprintf("route %q is declared twice", r.Name)
			if other != r.Name {
				rule = fmt.Sprintf("routes %q and %q share the variable prefix %s_%s%s_", other, r.Name, prefix, routeInfix, p)
			}
			d.probs = append(d.probs, Problem{System: s.Name, Var: where, Value: r.Name, Source: src, Rule: rule})
			return
		}
		byPrefix[p], seen[r.Name] = r.Name, true
		d.routes = append(d.routes, r)
	}
	for _, r := range s.Routes {
		add(r, "code", FromCode)
	}
	list, set := env[listVar]
	if !set || strings.TrimSpace(list) == "" {
		return d
	}
	shown := clip(list, 200)
	listed := map[string]bool{}
	for i, raw := range strings.Split(list, ",") {
		name := strings.TrimSpace(raw)
		switch {
		case name == "":
			d.probs = append(d.probs, Problem{System: s.Name, Var: listVar, Value: shown, Source: FromEnv,
				Rule: fmt.Sprintf("entry %d is empty: list route names separated by commas, e.g. create-charge,get-charge", i+1)})
		case listed[name]:
			d.probs = append(d.probs, Problem{System: s.Name, Var: listVar, Value: shown, Source: FromEnv,
				Rule: fmt.Sprintf("route %q is listed twice", name)})
		case seen[name]:
			listed[name] = true // declared in code too: the code's settings apply
		default:
			listed[name] = true
			add(Route{Name: name}, listVar, FromEnv)
		}
	}
	return d
}

// loadRoutes loads the declared routes of system l from env (nil: code
// only). Each route's settings are judged with the system's rules, laid
// over the system's settings, when the system itself has no problem
// (systemOK): a route cannot be judged against settings that are wrong.
func loadRoutes(l *Loaded, s System, env map[string]string, systemOK bool) []Problem {
	d := declareRoutes(s, l.Prefix, env)
	probs := d.probs
	l.Routes = make([]LoadedRoute, 0, len(d.routes))
	for _, r := range d.routes {
		lr, ps := loadRoute(l, r, env, systemOK)
		probs = append(probs, ps...)
		l.Routes = append(l.Routes, lr)
	}
	probs = append(probs, checkPatterns(l)...)
	return probs
}

// routeLoad is the loading of one route of system l: the route, the
// route as a system of its own (t, for the system's rules: the sources
// of the fields the route sets are stronger than any of the system's, so
// that a broken comparison is reported on the route's variable, never on
// a system variable the route did not set), the source of each setting
// it sets (by suffix), the fields that did not parse, and the problems.
type routeLoad struct {
	l     *Loaded
	lr    LoadedRoute
	t     Loaded
	set   map[string]Source
	bad   map[string]bool
	probs []Problem
}

// loadRoute reads route r of system l: its code settings, then its
// variables, then the system's rules over the result.
func loadRoute(l *Loaded, r Route, env map[string]string, systemOK bool) (LoadedRoute, []Problem) {
	rl := &routeLoad{l: l, set: map[string]Source{}, bad: map[string]bool{},
		lr: LoadedRoute{Name: r.Name, Prefix: l.Prefix + "_" + routeInfix + Prefix(r.Name), Match: r.Match,
			Client: l.Client, Idempotent: r.Idempotent, OwnBreaker: r.Breaker == "own"}}
	rl.lr.Client.RateLimit = "0"
	rl.t = Loaded{Name: l.Name, Prefix: rl.lr.Prefix, fleetRedis: l.fleetRedis,
		sources: slices.Clone(l.sources), raw: make([]string, len(fields().all))}
	for i := range rl.t.sources {
		rl.t.raw[i] = l.shown(&fields().all[i])
	}
	code := routeCode(r)
	for _, rs := range routeSettings {
		text, src := code[rs.suffix], FromCode
		if v, ok := env[rl.lr.Prefix+"_"+rs.suffix]; ok {
			text, src = v, FromEnv
		} else if _, ok := code[rs.suffix]; !ok {
			continue
		}
		rl.read(rs, text, src)
	}
	if rl.lr.Match == "" {
		src, ok := rl.set["MATCH"]
		if !ok {
			src = FromBaseline
		}
		rl.probs = append(rl.probs, Problem{System: l.Name, Var: rl.lr.Prefix + "_MATCH", Source: src,
			Rule: fmt.Sprintf("route %q needs a pattern: the method and path it covers, e.g. POST /v1/charges", r.Name)})
	}
	if systemOK {
		rl.check()
	}
	return rl.lr, rl.probs
}

// routeCode is what the code declares of route r, as variables would
// spell it (suffix -> text).
func routeCode(r Route) map[string]string {
	code := map[string]string{}
	if r.ReadTimeout != 0 {
		code["READ_TIMEOUT"] = r.ReadTimeout.String()
	}
	if r.CallTimeout != 0 {
		code["CALL_TIMEOUT"] = r.CallTimeout.String()
	}
	if r.Retries != nil {
		code["RETRIES"] = strconv.Itoa(*r.Retries)
	}
	if r.HedgeDelay != "" {
		code["HEDGE_DELAY"] = r.HedgeDelay
	}
	if r.RateLimit != "" {
		code["RATE_LIMIT"] = r.RateLimit
	}
	if r.Breaker != "" {
		code["BREAKER"] = r.Breaker
	}
	if r.Match != "" {
		code["MATCH"] = r.Match
	}
	return code
}

// read sets the route's setting rs from text, given at src.
func (rl *routeLoad) read(rs routeSetting, text string, src Source) {
	rl.set[rs.suffix] = src
	name := rl.lr.Prefix + "_" + rs.suffix
	problem := func(rule string) {
		rl.probs = append(rl.probs, Problem{System: rl.l.Name, Var: name, Value: clip(text, 200), Source: src, Rule: rule})
	}
	switch rs.suffix {
	case "MATCH":
		rl.lr.Match = strings.TrimSpace(text)
	case "IDEMPOTENT":
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			problem("not a boolean (true or false)")
		}
		rl.lr.Idempotent = b
	case "BREAKER":
		switch strings.TrimSpace(text) {
		case "system":
			rl.lr.OwnBreaker = false
		case "own":
			rl.lr.OwnBreaker = true
		default:
			problem("must be one of: system, own")
		}
	default:
		f := fields().byGoName[rs.goName]
		rl.t.sources[f.index], rl.t.raw[f.index] = fromRoute, clip(text, 200)
		if msg := parseInto(reflect.ValueOf(&rl.lr.Client).Elem().Field(f.index), f, text); msg != "" {
			rl.bad[f.goName] = true
			problem(msg)
		}
	}
}

// fromRoute marks, for the rules, a field a route sets: stronger than any
// source of the system's, so that a comparison broken by the route is
// reported on the route's variable.
const fromRoute Source = FromEnv + 1

// check judges the route's settings with the system's rules, and its own
// limit against the system's.
func (rl *routeLoad) check() {
	l, lr := rl.l, rl.lr
	rl.t.Client = lr.Client
	if lr.Client.RateLimit == "0" {
		rl.t.Client.RateLimit = l.Client.RateLimit // no limit of its own: nothing to judge
	}
	for _, p := range check(&rl.t, rl.bad) {
		suffix := strings.TrimPrefix(p.Var, lr.Prefix+"_")
		src, ok := rl.set[suffix]
		if !ok || routeSettingOf(suffix) == nil {
			continue // a rule the system's own settings break: reported on the system
		}
		p.Source = src
		rl.probs = append(rl.probs, p)
	}
	if own := lr.Rate(); own.Limited() && !rl.bad["RateLimit"] {
		if sys := l.Client.Rate(); sys.Limited() && own.PerSecond() > sys.PerSecond() {
			rl.probs = append(rl.probs, Problem{System: l.Name, Var: lr.Prefix + "_RATE_LIMIT", Value: lr.Client.RateLimit, Source: rl.set["RATE_LIMIT"],
				Rule: "must be at most the system's RATE_LIMIT (= " + l.Client.RateLimit + "): a route's limit is inside its system's"})
		}
	}
}

// checkPatterns checks every route's MATCH: a ServeMux pattern, without
// a host, that no other route of the system has or conflicts with.
func checkPatterns(l *Loaded) []Problem {
	mux := http.NewServeMux()
	var probs []Problem
	for i, r := range l.Routes {
		if r.Match == "" {
			continue
		}
		v := r.Prefix + "_MATCH"
		if msg := patternProblem(r.Match); msg != "" {
			probs = append(probs, Problem{System: l.Name, Var: v, Value: clip(r.Match, 200), Source: FromEnv, Rule: msg})
			continue
		}
		if other := registerPattern(mux, r.Match, l.Routes[:i]); other != "" {
			probs = append(probs, Problem{System: l.Name, Var: v, Value: clip(r.Match, 200), Source: FromEnv, Rule: other})
		}
	}
	return probs
}

// patternProblem says what is wrong with a route's pattern on its own, or
// "".
func patternProblem(p string) string {
	path := p
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		path = strings.TrimLeft(p[i:], " \t")
	}
	if !strings.HasPrefix(path, "/") {
		return "must be [METHOD ]/path with no host (e.g. POST /v1/charges): a route is matched inside its system's BASE_URL"
	}
	if msg := registerPattern(http.NewServeMux(), p, nil); msg != "" {
		return msg
	}
	return ""
}

// registerPattern registers p on mux and returns "" or why it cannot be:
// a pattern ServeMux refuses, or one equal to or in conflict with the
// pattern of an earlier route.
func registerPattern(mux *http.ServeMux, p string, earlier []LoadedRoute) (msg string) {
	defer func() {
		e := recover()
		if e == nil {
			return
		}
		text := fmt.Sprint(e)
		for _, o := range earlier {
			if strings.Contains(text, strconv.Quote(o.Match)) {
				if o.Match == p {
					msg = fmt.Sprintf("route %q has the same pattern", o.Name)
				} else {
					msg = fmt.Sprintf("conflicts with route %q (%s): neither is more specific, so a request could match both", o.Name, o.Match)
				}
				return
			}
		}
		// ServeMux's message, less its "http: " and the place it was
		// registered at.
		text = strings.TrimPrefix(text, "http: ")
		if i := strings.Index(text, " (registered at"); i >= 0 {
			text = text[:i]
		}
		msg = "not a ServeMux pattern: " + text
	}()
	mux.Handle(p, http.NotFoundHandler())
	return ""
}

// routeVarProblem judges a variable under a system's prefix whose suffix
// starts with ROUTE_: a setting of a declared route, a near miss of one
// (with its "did you mean"), or a route that is not declared. It returns
// the problem's rule, or "" for a known setting.
func routeVarProblem(systemPrefix, suffix string, routes []LoadedRoute) string {
	rest := strings.TrimPrefix(suffix, routeInfix)
	best := ""
	for _, r := range routes {
		p := strings.TrimPrefix(r.Prefix, systemPrefix+"_"+routeInfix) + "_"
		if strings.HasPrefix(rest, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		names := make([]string, len(routes))
		for i, r := range routes {
			names[i] = r.Name
		}
		if len(names) == 0 {
			return fmt.Sprintf("names a route, but %s_%s declares none", systemPrefix, RoutesSuffix)
		}
		return fmt.Sprintf("names no declared route (%s_%s: %s)", systemPrefix, RoutesSuffix, strings.Join(names, ","))
	}
	setting := rest[len(best):]
	if routeSettingOf(setting) != nil {
		return ""
	}
	s := suggestRouteSetting(setting)
	if s == "" {
		all := make([]string, len(routeSettings))
		for i, rs := range routeSettings {
			all[i] = rs.suffix
		}
		return "matches no route setting (" + strings.Join(all, ", ") + ")"
	}
	return fmt.Sprintf("matches no route setting; did you mean %s_%s%s%s?", systemPrefix, routeInfix, best, s)
}

// suggestRouteSetting returns the route setting s is a likely typo of, or
// "", by the rule of suggest.
func suggestRouteSetting(s string) string {
	s = strings.ToUpper(s)
	words := sortedWords(s)
	best, bestD := "", 3
	for _, rs := range routeSettings {
		if words == sortedWords(rs.suffix) {
			return rs.suffix
		}
		limit := 2
		if len(rs.suffix) < 6 {
			limit = 1
		}
		if d := distance(s, rs.suffix); d <= limit && d < bestD {
			best, bestD = rs.suffix, d
		}
	}
	return best
}

// RouteReference documents the route variables of each system: its list
// of routes and, for each route declared in code, its settings with their
// defaults; the settings of a route declared in the environment are the
// same, under its own prefix (<P>_ROUTE_<R>_...).
func RouteReference(systems ...System) []Var {
	var out []Var
	for _, s := range systems {
		if checkName(s.Name) != "" {
			continue
		}
		p := Prefix(s.Name)
		names := make([]string, 0, len(s.Routes))
		for _, r := range s.Routes {
			names = append(names, r.Name)
		}
		out = append(out, Var{System: s.Name, Name: p + "_" + RoutesSuffix, Setting: "Routes", Type: "string",
			Default: strings.Join(names, ","), Rule: "comma separated route names, each " + nameShape,
			Description: "the system's routes: operations with settings of their own (" + p + "_ROUTE_<R>_MATCH, ...)"})
		for _, r := range append(s.Routes, Route{Name: "<r>"}) {
			rp := p + "_" + routeInfix + strings.ToUpper(strings.ReplaceAll(r.Name, "-", "_"))
			for _, rs := range routeSettings {
				out = append(out, Var{System: s.Name, Name: rp + "_" + rs.suffix, Setting: "Route." + rs.suffix,
					Type: rs.typ, Default: routeDefault(r, rs), Rule: rs.rule, Description: rs.desc})
			}
		}
	}
	return out
}

// routeDefault is the code's value of setting rs of route r, "" for the
// system's.
func routeDefault(r Route, rs routeSetting) string {
	switch rs.suffix {
	case "MATCH":
		return r.Match
	case "READ_TIMEOUT":
		if r.ReadTimeout != 0 {
			return formatDuration(r.ReadTimeout)
		}
	case "CALL_TIMEOUT":
		if r.CallTimeout != 0 {
			return formatDuration(r.CallTimeout)
		}
	case "RETRIES":
		if r.Retries != nil {
			return strconv.Itoa(*r.Retries)
		}
	case "IDEMPOTENT":
		return strconv.FormatBool(r.Idempotent)
	case "HEDGE_DELAY":
		return r.HedgeDelay
	case "RATE_LIMIT":
		return r.RateLimit
	case "BREAKER":
		if r.Breaker == "" {
			return "system"
		}
		return r.Breaker
	}
	return ""
}
