// Package observe is the vocabulary of what happens to outbound's calls,
// for the code that watches them: metrics, logs, traces, status pages.
//
// It states once, in two tables, how an attempt or a call can end:
//
//   - [Op] names what ended an attempt or a call without a response (a
//     connect timeout, an open breaker, a full bulkhead, ...). Its table
//     says whether another attempt may cure it ([Op.Retryable]), how the
//     breaker counts it ([Op.Verdict]), whether it is a timeout
//     ([Op.Timeout]), whether it tells of the upstream's load
//     ([Op.Load]), and, for a call refused before anything was sent, the
//     outcome and the reason a refusal response gives ([Op.Refusal]).
//   - [Outcome] is the label of an ended attempt or call (ok, retry,
//     gave_up, breaker_open, ...). Its table says whether it applies to
//     calls, to attempts or to both ([CallOutcomes], [AttemptOutcomes]),
//     so that a metric's series are known before the first event.
//
// The registry decides with these tables, and the events it sends to an
// [Observer] ([AttemptEvent], [CallEvent], breaker changes) and the
// [Status] snapshot of a client carry their values, so that the
// registry's breaker, its retries, a metric, a log record and a status
// page can never disagree on what happened.
//
// Responses are classified by status ([StatusClass] gives the bounded
// label 1xx..5xx); which statuses are retried and which the breaker
// counts as failures is stated in the README and applied by the
// registry.
package observe
