// Package sdk wires two real SDKs that accept an *http.Client, stripe-go
// and openai-go, to registry clients, so that every call they make runs
// outbound's pipeline (docs/sdk.md, "Behind an SDK"):
//
//   - one retry layer: the SDK's retries are off, outbound's are on
//     (RETRIES), so an outage costs at most 1 + RETRIES upstream requests
//     per SDK call instead of (1 + RETRIES) x (1 + the SDK's);
//   - the SDK's base URL is the system's BASE_URL: outbound refuses any
//     other origin (registry.ErrOtherOrigin);
//   - OMIT_TIME_BUDGET is true by default: a third party has no use for
//     X-Time-Budget;
//   - a refusal (breaker open, bulkhead full, budget spent) reaches the SDK
//     as a 503 it does not retry, and Refusal reads it back from the SDK's
//     error;
//   - a replayable call that outbound retried and gave up on with an error
//     (a read timeout, a reset) reaches the SDK as a 504 or 502 it does not
//     retry, and GaveUp reads the cause back from the SDK's error.
//
// It is a module of its own, so that the core never requires the SDKs.
package sdk
