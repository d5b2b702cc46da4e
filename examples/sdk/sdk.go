package sdk

import (
	"errors"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stripe/stripe-go/v82"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// The systems, declared in code with their defaults; their variables are
// STRIPE_* and OPENAI_* (STRIPE_BASE_URL=https://api.stripe.com,
// OPENAI_BASE_URL=https://api.openai.com/v1). The SDKs' own variables under
// the same prefixes (STRIPE_SECRET_KEY, OPENAI_API_KEY) are not outbound's
// and are ignored by its config check.
var (
	Stripe = thirdParty("stripe")
	OpenAI = thirdParty("openai")
)

// thirdParty is a system outside the company: it never receives
// X-Time-Budget.
func thirdParty(name string) config.System {
	d := config.Baseline()
	d.OmitTimeBudget = true
	return config.System{Name: name, Defaults: d}
}

// NewStripe returns a stripe-go client whose calls all go through c (the
// "stripe" system): its HTTP client is c.HTTPClient(), its URL c's
// BASE_URL, and its own retries are off. logger is stripe-go's (nil: its
// default, errors to stderr).
func NewStripe(c *registry.Client, key string, logger stripe.LeveledLoggerInterface) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        c.HTTPClient(),
		URL:               stripe.String(c.BaseURL().String()),
		MaxNetworkRetries: stripe.Int64(0), // outbound retries: one layer
		LeveledLogger:     logger,
	})
	return stripe.NewClient(key, stripe.WithBackends(backends))
}

// NewOpenAI returns an openai-go client whose calls all go through c (the
// "openai" system): its HTTP client is c.HTTPClient(), its base URL c's
// BASE_URL, and its own retries are off. opts come after these.
func NewOpenAI(c *registry.Client, key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithAPIKey(key),
		option.WithBaseURL(c.BaseURL().String()),
		option.WithHTTPClient(c.HTTPClient()),
		option.WithMaxRetries(0), // outbound retries: one layer
	}, opts...)...)
}

// Refusal returns outbound's refusal carried by an SDK's error (see
// registry.Refusal): the *registry.Error, matching registry.ErrCircuitOpen,
// bulkhead.ErrFull, registry.ErrRateLimited or capbudget.ErrExhausted, or
// nil when err is not one.
// openai-go keeps the response in its *openai.Error; stripe-go keeps only
// the body, whose error type is "outbound_refused" and code the reason.
func Refusal(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) && oe.Response != nil {
		return registry.Refusal(oe.Response.Header)
	}
	var se *stripe.Error
	if errors.As(err, &se) && se.Type == "outbound_refused" {
		return registry.Refusal(http.Header{
			registry.RefusedHeader: {string(se.Code)},
			"X-Outbound-System":    {Stripe.Name},
		})
	}
	return nil
}

// GaveUp returns outbound's decision to give up, carried by an SDK's
// error, on a replayable call it retried and that ended with an error
// rather than a status (a read timeout, a reset, a refused connection;
// see registry.GaveUp): the *registry.Error naming the system and the op
// of the last attempt, or nil when err is not one. openai-go keeps the
// response, which also says the attempts sent; stripe-go keeps only the
// body, whose error type is "outbound_gave_up" and code the op ("_" for
// spaces: "read_timeout").
func GaveUp(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) && oe.Response != nil {
		return registry.GaveUp(oe.Response.Header)
	}
	var se *stripe.Error
	if errors.As(err, &se) && se.Type == "outbound_gave_up" {
		return registry.GaveUp(http.Header{
			registry.GaveUpHeader: {strings.ReplaceAll(string(se.Code), "_", " ")},
			"X-Outbound-System":   {Stripe.Name},
		})
	}
	return nil
}
