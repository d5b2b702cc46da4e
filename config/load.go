package config

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/outbound-go/outbound/internal/redact"

	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SystemsVar names the variable that declares systems by name, comma
// separated: OUTBOUND_SYSTEMS=payments,inventory.
const SystemsVar = "OUTBOUND_SYSTEMS"

// Source says where a setting's value came from.
type Source uint8

const (
	// FromBaseline: neither the code nor the environment set it.
	FromBaseline Source = iota
	// FromCode: [System].Defaults set it.
	FromCode
	// FromEnv: the environment set it.
	FromEnv
)

func (s Source) String() string {
	switch s {
	case FromCode:
		return "code"
	case FromEnv:
		return "env"
	default:
		return "baseline"
	}
}

// Loaded is one system as loaded: its name, its variable prefix, its
// effective settings and where each came from.
type Loaded struct {
	Name   string
	Prefix string // PAYMENTS
	Client Client
	// Routes are the system's routes, code first, then <P>_ROUTES.
	Routes []LoadedRoute

	sources  []Source // by field index
	raw      []string // the environment's text (redacted), by field index; nil once the settings are edited
	defaults Client   // System.Defaults, for Vars
	valid    bool     // Load found no problem with this system
	checked  Client   // the settings Load validated
	ignored  []string // variables under Prefix that are not outbound's
	tls      tlsState // what Load read from the TLS files
	faultsOn bool     // OUTBOUND_FAULTS=on: the fault settings may inject
	// fleetRedis: the load has a fleet Redis (OUTBOUND_FLEET_REDIS_URL),
	// which BREAKER_SCOPE=fleet and RATE_SCOPE=fleet need.
	fleetRedis bool
	// loadWarns are the warnings of the load as a whole ([Warnings]),
	// the same in every system it loaded.
	loadWarns []Problem
}

// Ignored returns the variables under the system's prefix that Load left
// alone because they are not outbound's (an SDK's STRIPE_SECRET_KEY, a
// Kubernetes PAYMENTS_SERVICE_HOST), sorted. A near miss of a setting's
// name is a problem instead. Values are never kept.
func (l Loaded) Ignored() []string { return slices.Clone(l.ignored) }

// Valid reports whether [Load] loaded this system and found no problem
// with it. A Loaded built by hand, or one Load reported problems for, is
// not valid: registry.New refuses it, so that a zero timeout (no timeout
// at all) can never reach a client.
//
// Settings changed after Load (l.Client edited) are not valid either.
func (l Loaded) Valid() bool { return l.valid && l.Client == l.checked }

// shown returns how the value of field f is shown (problems, Vars,
// Summary): as the operator typed it when it came from the environment
// ("70s", not "1m10s"; "abc" for a value that did not parse, not the
// default it left in place), otherwise formatted; secrets redacted either
// way.
func (l *Loaded) shown(f *field) string {
	if l.raw != nil && l.sources[f.index] >= FromEnv { // a route's setting too
		return l.raw[f.index] // redacted when stored
	}
	return f.format(reflect.ValueOf(l.Client).Field(f.index))
}

// redactText is how the environment's text of field f may be kept and
// shown: URLs redacted, secrets replaced.
func redactText(f *field, text string) string {
	switch {
	case f.typ == "url":
		return redact.BaseURL(text)
	case f.secret:
		return redacted
	}
	return text
}

// String describes a loaded system with its settings redacted, so that
// printing a Loaded (%v, %+v) never shows credentials.
func (l Loaded) String() string {
	return fmt.Sprintf("%s (%s_*): %v", l.Name, l.Prefix, l.Client)
}

// GoString is String, so that %#v does not show credentials either.
func (l Loaded) GoString() string { return l.String() }

// LogValue makes slog log a Loaded redacted.
func (l Loaded) LogValue() slog.Value { return slog.StringValue(l.String()) }

// MarshalJSON renders the name, the prefix and the settings, redacted
// (see [Client.MarshalJSON]).
func (l Loaded) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name   string `json:"name"`
		Prefix string `json:"prefix"`
		Client Client `json:"client"`
	}{l.Name, l.Prefix, l.Client})
}

// SourceOf says where the setting with the given env suffix
// ("CONNECT_TIMEOUT") came from.
func (l Loaded) SourceOf(suffix string) Source {
	f, ok := fields().bySuffix[suffix]
	if !ok || f.index >= len(l.sources) {
		return FromBaseline
	}
	return l.sources[f.index]
}

// Load declares the given systems plus those named in OUTBOUND_SYSTEMS,
// reads each one's variables from the process environment, validates them
// and returns them in declaration order (code first, then
// OUTBOUND_SYSTEMS).
//
// On any problem Load returns an [*Error] listing every problem of every
// system together with the systems it could load, so that a tool can still
// show their effective settings. Load never panics on any input.
func Load(systems ...System) ([]Loaded, error) {
	environ := os.Environ()
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return load(env, systems)
}

// LoadEnv is [Load] with the environment given as a map (KEY -> value)
// instead of read from the process: for tests, which can then run in
// parallel, and for tools that check an environment they did not start
// with. The map is only read.
func LoadEnv(env map[string]string, systems ...System) ([]Loaded, error) {
	return load(env, systems)
}

// nameRE is the shape of a system name: "payments", "order-history".
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$`)

// Prefix returns the variable prefix of a system name: "order-history"
// reads ORDER_HISTORY_*.
func Prefix(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// CheckName returns an error saying what is wrong with a system name, or
// nil: the rule of System.Name and OUTBOUND_SYSTEMS, for tools that take
// a system's name from elsewhere (a command line).
func CheckName(name string) error {
	if msg := checkName(name); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// checkName returns what is wrong with a system name, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "system name is empty"
	case len(name) > maxNameLen:
		return "system name is longer than " + strconv.Itoa(maxNameLen) + " bytes"
	case !nameRE.MatchString(name):
		return "system name must be " + nameShape + " (e.g. payments, order-history)"
	case Prefix(name) == "OUTBOUND":
		return "system name \"outbound\" is reserved (OUTBOUND_* variables configure the registry itself)"
	}
	return ""
}

// LoadCode validates systems declared entirely in code, ignoring the
// environment (OUTBOUND_SYSTEMS and every system variable): for tests,
// examples and tools that build clients without env. The rules and the
// report are those of [Load].
func LoadCode(systems ...System) ([]Loaded, error) {
	return load(nil, systems)
}

// load declares and loads systems, reading env (nil for "code only"). It
// is the one path by which values are read.
func load(env map[string]string, systems []System) ([]Loaded, error) {
	d := declareSystems(env, systems)
	probs := d.probs
	fleet, fleetProbs := loadFleet(env)
	probs = append(probs, fleetProbs...)
	out := make([]Loaded, 0, len(d.systems))
	routes := make(map[string][]LoadedRoute, len(d.systems))
	for _, s := range d.systems {
		l, ps := loadSystem(s, env, fleet.RedisURL != "")
		ps = append(ps, loadRoutes(&l, s, env, len(ps) == 0)...)
		routes[l.Prefix] = l.Routes
		out = append(out, l)
		probs = append(probs, ps...)
	}
	probs = append(probs, faultsVarProblem(env)...)
	typos, ignored := unknownVars(env, d.byPrefix, routes)
	probs = append(probs, typos...)
	warns := loadWarnings(env, fleet, out)
	for i := range out {
		out[i].ignored = ignored[out[i].Name]
		out[i].loadWarns = warns
	}
	markValid(out, probs)
	if len(probs) > 0 {
		return out, &Error{Problems: probs}
	}
	return out, nil
}

// declarations are the systems one load covers, those declared in code
// first, then those of OUTBOUND_SYSTEMS, with the problems of either list.
type declarations struct {
	systems  []System
	byPrefix map[string]string // prefix -> name
	probs    []Problem
}

// declareSystems declares the systems of code and of env's
// OUTBOUND_SYSTEMS, in that order.
func declareSystems(env map[string]string, systems []System) *declarations {
	d := &declarations{
		systems:  make([]System, 0, len(systems)),
		byPrefix: make(map[string]string, len(systems)),
	}
	for _, s := range systems {
		d.add(s, "code")
	}
	d.addList(env[SystemsVar], systems)
	if len(d.systems) == 0 && len(d.probs) == 0 {
		d.probs = append(d.probs, noSystemProblem(env))
	}
	return d
}

// maxFoundShown bounds the BASE_URL variables a "no system declared"
// problem names.
const maxFoundShown = 5

// noSystemProblem is the problem of a load that declares no system at
// all: a registry without clients is a configuration error, not an empty
// success. It names the <SYSTEM>_BASE_URL variables of env (nil: a
// LoadCode, which reads none), the systems the operator likely meant.
func noSystemProblem(env map[string]string) Problem {
	p := Problem{Var: SystemsVar, Source: FromBaseline}
	if v, set := env[SystemsVar]; set {
		p.Value, p.Source = strings.TrimSpace(v), FromEnv
	}
	if env == nil {
		p.Rule = "no system declared: pass at least one config.System (LoadCode reads no environment)"
		return p
	}
	var found, names []string
	for k := range env {
		prefix, ok := strings.CutSuffix(k, "_BASE_URL")
		if name := strings.ReplaceAll(strings.ToLower(prefix), "_", "-"); ok && Prefix(name) == prefix && checkName(name) == "" {
			found, names = append(found, k), append(names, name)
		}
	}
	switch {
	case len(found) == 0:
		p.Rule = "no system declared: set " + SystemsVar + " (e.g. " + SystemsVar + "=payments,inventory) or declare a config.System in code, and give each system its <SYSTEM>_BASE_URL"
		return p
	case len(found) == 1:
		p.Rule = fmt.Sprintf("no system declared: set %s=%s or declare config.System{Name: %q} in code", SystemsVar, names[0], names[0])
	default:
		slices.Sort(found)
		slices.Sort(names)
		p.Rule = fmt.Sprintf("no system declared: set %s=%s or declare each in code (config.System{Name: %q})", SystemsVar, strings.Join(names, ","), names[0])
	}
	if len(found) > maxFoundShown {
		found = append(found[:maxFoundShown], "…")
	}
	p.Rule += "; found " + strings.Join(found, ", ")
	return p
}

// add declares s, found in where ("code" or OUTBOUND_SYSTEMS), unless its
// name is bad or its prefix is taken.
func (d *declarations) add(s System, where string) {
	if msg := checkName(s.Name); msg != "" {
		if where == SystemsVar {
			msg = fmt.Sprintf("entry %q: %s", s.Name, msg)
		}
		d.probs = append(d.probs, Problem{Var: where, Value: s.Name, Source: sourceOfWhere(where), Rule: msg})
		return
	}
	p := Prefix(s.Name)
	if other, dup := d.byPrefix[p]; dup {
		rule := fmt.Sprintf("system %q is declared twice", s.Name)
		if other != s.Name {
			rule = fmt.Sprintf("systems %q and %q share the variable prefix %s_", other, s.Name, p)
		}
		d.probs = append(d.probs, Problem{Var: where, Value: s.Name, Source: sourceOfWhere(where), Rule: rule})
		return
	}
	d.byPrefix[p] = s.Name
	d.systems = append(d.systems, s)
}

// addList declares the systems of OUTBOUND_SYSTEMS that code did not. An
// empty list declares nothing; a list with an empty entry
// ("payments,,inventory") is a mistake worth reporting.
func (d *declarations) addList(list string, code []System) {
	if strings.TrimSpace(list) == "" {
		return
	}
	// Problems quote the list clipped: a long list with many bad entries
	// must not make the report quadratic.
	shown := clip(list, 200)
	fromCode := make(map[string]bool, len(code))
	for _, s := range code {
		fromCode[s.Name] = true
	}
	seen := map[string]bool{}
	for i, raw := range strings.Split(list, ",") {
		name := strings.TrimSpace(raw)
		switch {
		case name == "":
			d.probs = append(d.probs, Problem{Var: SystemsVar, Value: shown, Source: FromEnv,
				Rule: fmt.Sprintf("entry %d is empty: list system names separated by commas, e.g. payments,inventory", i+1)})
		case seen[name]:
			d.probs = append(d.probs, Problem{Var: SystemsVar, Value: shown, Source: FromEnv,
				Rule: fmt.Sprintf("system %q is listed twice", name)})
		case fromCode[name]:
			seen[name] = true // declared in code too: the code's defaults apply
		default:
			seen[name] = true
			d.add(System{Name: name}, SystemsVar)
		}
	}
}

// markValid marks each loaded system valid unless a problem names it. A
// problem of no one system (the list of systems itself: a bad name, a
// duplicate) leaves every system invalid: the set that loaded is not the
// set that was declared.
func markValid(out []Loaded, probs []Problem) {
	bad := make(map[string]bool)
	for _, p := range probs {
		bad[p.System] = true
	}
	for i := range out {
		out[i].valid = !bad[out[i].Name] && !bad[""]
		out[i].checked = out[i].Client
	}
}

// clip shortens s to at most n bytes (plus an ellipsis), on a rune
// boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func sourceOfWhere(where string) Source {
	if where == SystemsVar {
		return FromEnv
	}
	return FromCode
}

// loadSystem reads the variables of s from env (nil: none), parses them
// over the system's defaults and validates the result; fleetRedis says
// whether the load has a fleet Redis.
func loadSystem(s System, env map[string]string, fleetRedis bool) (Loaded, []Problem) {
	l := Loaded{Name: s.Name, Prefix: Prefix(s.Name), Client: withDefaults(s.Defaults), defaults: s.Defaults, fleetRedis: fleetRedis}
	l.sources = make([]Source, len(fields().all))
	l.raw = make([]string, len(fields().all))
	codeSources(s.Defaults, l.sources)

	var probs []Problem
	cv := reflect.ValueOf(&l.Client).Elem()
	bad := make(map[string]bool)
	for i := range fields().all {
		f := &fields().all[i]
		text, set := env[l.Prefix+"_"+f.suffix]
		if !set {
			continue
		}
		l.sources[i] = FromEnv
		l.raw[i] = redactText(f, text)
		if err := parseInto(cv.Field(f.index), f, text); err != "" {
			bad[f.goName] = true
			probs = append(probs, Problem{System: s.Name, Var: l.Prefix + "_" + f.suffix, Value: l.raw[i], Source: FromEnv, Rule: err})
		}
	}
	probs = append(probs, check(&l, bad)...)
	l.faultsOn = env[FaultsVar] == "on"
	probs = append(probs, l.faultGuard()...)
	// The TLS files are read now, so a missing file, a key that does not
	// match its certificate or an expired certificate joins this report.
	tlsProbs, warns, files := checkTLSFiles(&l, bad, time.Now())
	l.tls = tlsState{read: true, files: files, warns: warns}
	probs = append(probs, tlsProbs...)
	return l, probs
}

// Revalidate checks the settings of l again, after code changed them
// (l.Client edited after Load), with the rules of Load, TLS files
// included. It returns l, valid, or an [*Error] with every problem.
// Values shown in problems are the edited ones.
func Revalidate(l Loaded) (Loaded, error) {
	if len(l.sources) != len(fields().all) {
		return l, &Error{Problems: []Problem{{System: l.Name, Var: "code", Value: l.Name,
			Rule: "settings not loaded by config.Load or config.LoadCode"}}}
	}
	l.raw = nil // the environment's text no longer applies
	probs := check(&l, nil)
	probs = append(probs, l.faultGuard()...)
	tlsProbs, warns, files := checkTLSFiles(&l, nil, time.Now())
	l.tls = tlsState{read: true, files: files, warns: warns}
	probs = append(probs, tlsProbs...)
	l.valid, l.checked = len(probs) == 0, l.Client
	if len(probs) > 0 {
		return l, &Error{Problems: probs}
	}
	return l, nil
}

// parseInto parses text into dst, a field of Client, and returns what is
// wrong with it in plain words, or "".
func parseInto(dst reflect.Value, f *field, text string) string {
	switch f.typ {
	case "duration":
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			if _, nerr := strconv.ParseFloat(strings.TrimSpace(text), 64); nerr == nil && text != "0" {
				return "not a duration: a unit is missing (write 750ms, 2s, 1m)"
			}
			return "not a duration: use Go syntax with a unit (750ms, 2s, 1m30s)"
		}
		dst.SetInt(int64(d))
	case "int":
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 32)
		if err != nil {
			return "not a whole number"
		}
		dst.SetInt(n)
	case "float":
		x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return "not a finite number"
		}
		dst.SetFloat(x)
	case "bool":
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return "not a boolean (true or false)"
		}
		dst.SetBool(b)
	default:
		dst.SetString(text)
	}
	return ""
}
