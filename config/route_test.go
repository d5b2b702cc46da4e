package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/config"
)

// Routes declared in the environment load with the system's settings and
// their own laid over them; the environment overrides a route declared
// in code, setting by setting.
func TestRoutesLoadOverTheSystemsSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"OUTBOUND_SYSTEMS":                          "payments",
		"PAYMENTS_BASE_URL":                         goodURL,
		"PAYMENTS_ROUTES":                           "create-charge,get-charge",
		"PAYMENTS_ROUTE_CREATE_CHARGE_MATCH":        "POST /v1/charges",
		"PAYMENTS_ROUTE_CREATE_CHARGE_RETRIES":      "0",
		"PAYMENTS_ROUTE_CREATE_CHARGE_READ_TIMEOUT": "30s",
		"PAYMENTS_ROUTE_CREATE_CHARGE_CALL_TIMEOUT": "40s",
		"PAYMENTS_ROUTE_CREATE_CHARGE_BREAKER":      "own",
		"PAYMENTS_ROUTE_GET_CHARGE_MATCH":           "GET /v1/charges/{id}",
		"PAYMENTS_ROUTE_EXPORT_READ_TIMEOUT":        "20s", // the code's route, read longer by the env
	}
	retries := 5
	ls, err := config.LoadEnv(env, config.System{Name: "payments", Routes: []config.Route{{
		Name: "export", Match: "GET /v1/exports/{id}", ReadTimeout: 15 * time.Second, CallTimeout: 30 * time.Second,
		Retries: &retries, Idempotent: true,
	}}})
	if err != nil {
		t.Fatalf("LoadEnv: %v", err)
	}
	rs := ls[0].Routes
	if len(rs) != 3 || rs[0].Name != "export" || rs[1].Name != "create-charge" || rs[2].Name != "get-charge" {
		t.Fatalf("routes %+v, want export (code), create-charge, get-charge", rs)
	}
	sys := ls[0].Client
	for _, c := range []struct {
		r                   config.LoadedRoute
		read, call          time.Duration
		retries             int
		idempotent, breaker bool
		prefix, match       string
	}{
		{rs[0], 20 * time.Second, 30 * time.Second, 5, true, false, "PAYMENTS_ROUTE_EXPORT", "GET /v1/exports/{id}"},
		{rs[1], 30 * time.Second, 40 * time.Second, 0, false, true, "PAYMENTS_ROUTE_CREATE_CHARGE", "POST /v1/charges"},
		{rs[2], sys.ReadTimeout, sys.CallTimeout, sys.Retries, false, false, "PAYMENTS_ROUTE_GET_CHARGE", "GET /v1/charges/{id}"},
	} {
		got := c.r
		if got.Client.ReadTimeout != c.read || got.Client.CallTimeout != c.call || got.Client.Retries != c.retries ||
			got.Idempotent != c.idempotent || got.OwnBreaker != c.breaker || got.Prefix != c.prefix || got.Match != c.match {
			t.Errorf("%s: read %v call %v retries %d idempotent %v own breaker %v prefix %s match %q; want %v %v %d %v %v %s %q",
				got.Name, got.Client.ReadTimeout, got.Client.CallTimeout, got.Client.Retries, got.Idempotent, got.OwnBreaker,
				got.Prefix, got.Match, c.read, c.call, c.retries, c.idempotent, c.breaker, c.prefix, c.match)
		}
		if got.Client.ConnectTimeout != sys.ConnectTimeout || got.Client.MaxConcurrent != sys.MaxConcurrent {
			t.Errorf("%s: connection settings are not the system's", got.Name)
		}
	}
}

// A bad route environment is reported whole, in the one report, each
// problem naming its variable: a pattern that does not parse, one with a
// host, two routes with one pattern, the system's timeout rules with the
// system's connect timeout, a typo with its "did you mean", a route
// without MATCH, a route the list does not declare, a limit above the
// system's.
func TestBadRouteEnvironmentIsOneReportNamingEachVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"OUTBOUND_SYSTEMS":                   "payments",
		"PAYMENTS_BASE_URL":                  goodURL,
		"PAYMENTS_RATE_LIMIT":                "100/s",
		"PAYMENTS_ROUTES":                    "charges,refunds,search,files,export,same,slow,nomatch",
		"PAYMENTS_ROUTE_CHARGES_MATCH":       "POST /v1/charges",
		"PAYMENTS_ROUTE_CHARGES_RETRYS":      "1",
		"PAYMENTS_ROUTE_REFUNDS_MATCH":       "GET /v1/{x",
		"PAYMENTS_ROUTE_SEARCH_MATCH":        "GET api.example.com/v1/search",
		"PAYMENTS_ROUTE_FILES_MATCH":         "/v1/files/{path...}",
		"PAYMENTS_ROUTE_FILES_READ_TIMEOUT":  "1s", // not above CONNECT_TIMEOUT (2s)
		"PAYMENTS_ROUTE_EXPORT_MATCH":        "GET /v1/export",
		"PAYMENTS_ROUTE_EXPORT_READ_TIMEOUT": "90s",
		"PAYMENTS_ROUTE_SAME_MATCH":          "POST /v1/charges",
		"PAYMENTS_ROUTE_SLOW_MATCH":          "GET /v1/slow",
		"PAYMENTS_ROUTE_SLOW_READ_TIMEOUT":   "20s", // the system's CALL_TIMEOUT (15s) is too short for it
		"PAYMENTS_ROUTE_SLOW_RATE_LIMIT":     "200/s",
		"PAYMENTS_ROUTE_NOMATCH_RETRIES":     "1",
		"PAYMENTS_ROUTE_UNDECLARED_MATCH":    "GET /x",
	}
	_, err := config.LoadEnv(env)
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("LoadEnv: %v, want a *config.Error", err)
	}
	report := err.Error()
	for _, want := range []string{
		"PAYMENTS_ROUTE_CHARGES_RETRYS=REDACTED: matches no route setting; did you mean PAYMENTS_ROUTE_CHARGES_RETRIES?",
		"PAYMENTS_ROUTE_REFUNDS_MATCH=GET /v1/{x: not a ServeMux pattern",
		"PAYMENTS_ROUTE_SEARCH_MATCH=GET api.example.com/v1/search: must be [METHOD ]/path with no host",
		"PAYMENTS_ROUTE_FILES_READ_TIMEOUT=1s: must be > CONNECT_TIMEOUT (= 2s, baseline default)",
		"PAYMENTS_ROUTE_FILES_READ_TIMEOUT=1s: must be >= TLS_HANDSHAKE_TIMEOUT (= 3s, baseline default)",
		"PAYMENTS_ROUTE_EXPORT_READ_TIMEOUT=90s: must be <= 60s",
		`PAYMENTS_ROUTE_SAME_MATCH=POST /v1/charges: route "charges" has the same pattern`,
		"PAYMENTS_ROUTE_SLOW_READ_TIMEOUT=20s: must be <= CALL_TIMEOUT - CONNECT_TIMEOUT - 1s",
		"PAYMENTS_ROUTE_SLOW_RATE_LIMIT=200/s: must be at most the system's RATE_LIMIT (= 100/s)",
		`PAYMENTS_ROUTE_NOMATCH_MATCH (unset): route "nomatch" needs a pattern`,
		"PAYMENTS_ROUTE_UNDECLARED_MATCH=REDACTED: names no declared route (PAYMENTS_ROUTES: charges,refunds,search,files,export,same,slow,nomatch)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if len(cerr.Problems) != 11 {
		t.Errorf("%d problems, want 11:\n%s", len(cerr.Problems), report)
	}
}

// Two patterns that ServeMux would find ambiguous (neither more specific)
// are refused at start, naming the earlier route.
func TestConflictingRoutePatternsAreAProblem(t *testing.T) {
	t.Parallel()
	_, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": goodURL, "PAYMENTS_ROUTES": "a,b",
		"PAYMENTS_ROUTE_A_MATCH": "GET /v1/{x}/charges", "PAYMENTS_ROUTE_B_MATCH": "GET /v1/charges/{y}",
	})
	if err == nil || !strings.Contains(err.Error(), `PAYMENTS_ROUTE_B_MATCH=GET /v1/charges/{y}: conflicts with route "a" (GET /v1/{x}/charges)`) {
		t.Fatalf("got %v, want a conflict named on route b", err)
	}
}

// A route name follows the rule of system names, and a route listed twice
// is a problem.
func TestRouteNamesFollowTheSystemNameRule(t *testing.T) {
	t.Parallel()
	_, err := config.LoadEnv(map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": goodURL, "PAYMENTS_ROUTES": "Charges,get,get",
		"PAYMENTS_ROUTE_GET_MATCH": "GET /v1/x",
	})
	for _, want := range []string{"PAYMENTS_ROUTES=Charges: route name must be", `route "get" is listed twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// Without routes, a system loads none, and the ROUTES variable is no typo.
func TestSystemWithoutRoutesHasNone(t *testing.T) {
	t.Parallel()
	ls, err := config.LoadEnv(map[string]string{"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": goodURL, "PAYMENTS_ROUTES": ""})
	if err != nil || len(ls[0].Routes) != 0 {
		t.Fatalf("LoadEnv: %+v, %v; want no routes", ls, err)
	}
}
