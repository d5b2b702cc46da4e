package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestSDKVariablesUnderASystemPrefixAreIgnored: an SDK's own variables
// share the prefix of the system named after it (STRIPE_SECRET_KEY,
// OPENAI_API_KEY). They are not outbound's: listed by Ignored, never a
// problem. Only a near miss of a setting's name is.
func TestSDKVariablesUnderASystemPrefixAreIgnored(t *testing.T) {
	t.Parallel()
	const secret = "sk_live_hunter2"
	env := map[string]string{
		"STRIPE_BASE_URL":         "https://api.stripe.com",
		"STRIPE_SECRET_KEY":       secret,
		"STRIPE_WEBHOOK_SECRET":   secret,
		"STRIPE_API_VERSION":      "2025-01-01",
		"OPENAI_BASE_URL":         "https://api.openai.com/v1",
		"OPENAI_API_KEY":          secret,
		"OPENAI_ORG_ID":           "org-1",
		"OPENAI_PROJECT_ID":       "proj-1",
		"OPENAI_API_BASE":         "https://api.openai.com/v1",
		"OPENAI_API_URL":          "https://api.openai.com/v1",
		"OPENAI_LOG":              "debug",
		"OPENAI_API_SERVICE_HOST": "10.0.0.1",
	}
	ls, err := config.LoadEnv(env, config.System{Name: "stripe"}, config.System{Name: "openai"})
	if err != nil {
		t.Fatalf("an SDK's own variables fail the load: %v", err)
	}
	if got, want := ls[0].Ignored(), []string{"STRIPE_API_VERSION", "STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET"}; !slices.Equal(got, want) {
		t.Errorf("stripe Ignored() = %v, want %v", got, want)
	}
	if got := ls[1].Ignored(); len(got) != 7 || !slices.Contains(got, "OPENAI_API_KEY") {
		t.Errorf("openai Ignored() = %v", got)
	}

	// The system "openai-api" reads OPENAI_API_*: OPENAI_API_KEY is under
	// its prefix too.
	if _, err := config.LoadEnv(map[string]string{"OPENAI_API_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": secret},
		config.System{Name: "openai-api"}); err != nil {
		t.Errorf("openai-api: %v", err)
	}
}

// TestNearMissOfASettingNameIsAProblem: near misses of a setting's name
// fail the load, with the setting they were meant to be.
func TestNearMissOfASettingNameIsAProblem(t *testing.T) {
	t.Parallel()
	for typo, want := range map[string]string{
		"CONECT_TIMEOUT":           "CONNECT_TIMEOUT",
		"CONNECT_TIMOUT":           "CONNECT_TIMEOUT",
		"CONECT_TIMOUT":            "CONNECT_TIMEOUT",
		"READTIMEOUT":              "READ_TIMEOUT",
		"TIMEOUT_READ":             "READ_TIMEOUT",
		"read_timeout":             "READ_TIMEOUT",
		"RETRYS":                   "RETRIES",
		"MAX_CONCURENT":            "MAX_CONCURRENT",
		"BASEURL":                  "BASE_URL",
		"BREAKER_WINDOWS":          "BREAKER_WINDOW",
		"TLS_CERTFILE":             "TLS_CERT_FILE",
		"FOLLOW_REDIRECT":          "FOLLOW_REDIRECTS",
		"HALF_OPEN_PROBES_BREAKER": "BREAKER_HALF_OPEN_PROBES",
	} {
		t.Run(typo, func(t *testing.T) {
			t.Parallel()
			_, err := config.LoadEnv(map[string]string{
				"PAYMENTS_BASE_URL": goodURL,
				"PAYMENTS_" + typo:  "hunter2",
			}, config.System{Name: "payments"})
			probs := problemsOf(t, err)
			if len(probs) != 1 || probs[0].Var != "PAYMENTS_"+typo ||
				!strings.Contains(probs[0].Rule, "did you mean PAYMENTS_"+want+"?") {
				t.Fatalf("got:%s", dump(probs))
			}
			assertNoSecrets(t, "report", err.Error(), "hunter2")
		})
	}
}

// Kubernetes injects service-link variables for every Service of the
// namespace; a Service named "payments-db" next to system "payments" must
// not stop the pod.
func TestServiceLinksOfOtherServicesIgnored(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS":                    "payments",
		"PAYMENTS_BASE_URL":                   goodURL,
		"PAYMENTS_DB_SERVICE_HOST":            "10.0.0.9",
		"PAYMENTS_DB_SERVICE_PORT":            "5432",
		"PAYMENTS_DB_PORT":                    "tcp://10.0.0.9:5432",
		"PAYMENTS_DB_PORT_5432_TCP_ADDR":      "10.0.0.9",
		"PAYMENTS_API_V2_SERVICE_PORT_GRPC":   "9000",
		"PAYMENTS_API_V2_PORT_9000_TCP_PROTO": "tcp",
	})
	if _, err := config.Load(); err != nil {
		t.Fatalf("service-link variables of other Services reported: %v", err)
	}
}
