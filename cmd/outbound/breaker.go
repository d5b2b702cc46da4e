package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/observe"
)

// runBreaker is `outbound breaker SYSTEM open|closed|auto [--for D]
// [--pod URL]`: an operator's override of one system's breaker, sent to a
// pod's controls (statuspage.Controls), or, without --pod, written to the
// fleet's Redis (OUTBOUND_FLEET_*) for every pod of the service.
func runBreaker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("breaker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pod := fs.String("pod", "", "URL of one pod's operator controls (statuspage.Controls), e.g. http://10.0.0.5:9090/debug/outbound/controls; without it, every pod through the fleet's Redis")
	forD := fs.Duration("for", 15*time.Minute, "how long the override holds unless renewed (at most 24h)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: outbound breaker SYSTEM open|closed|auto [--for 15m] [--pod URL]

Forces a system's breaker for an operator: open refuses every call with
no I/O (reason forced-open), closed lets every call through whatever the
evidence, auto releases it to the breaker's own judgement. The override
ends by itself after --for unless renewed.

With --pod, the override goes to that pod's controls; at
BREAKER_SCOPE=fleet the pod writes it to the fleet's Redis and every pod
applies it. Without --pod, it is written to the fleet's Redis directly,
named by OUTBOUND_FLEET_REDIS_URL and OUTBOUND_FLEET_NAMESPACE as the
service's pods have them: every pod whose system is at
BREAKER_SCOPE=fleet applies it within a second, and a pod that starts
before it ends reads it.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(reorder(args)); err != nil {
		return exitUsage
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	system, state := fs.Arg(0), fs.Arg(1)
	switch state {
	case "open", "closed", "auto":
	default:
		fmt.Fprintf(stderr, "outbound breaker: state %q: want open, closed or auto\n", state)
		return exitUsage
	}
	o := override{system, state, *forD}
	if *pod == "" {
		return forceFleet(ctx, o, stdout, stderr)
	}
	body, err := postControl(ctx, *pod, o)
	if err != nil {
		fmt.Fprintf(stderr, "outbound breaker: %v\n", err)
		return exitInvalid
	}
	fmt.Fprintln(stdout, strings.TrimSpace(body))
	return exitOK
}

// forceFleet writes the override to the fleet's Redis, for every pod.
func forceFleet(ctx context.Context, o override, stdout, stderr io.Writer) int {
	fl, err := config.LoadFleet()
	if err != nil {
		fmt.Fprintf(stderr, "outbound breaker: %v\n", err)
		return exitInvalid
	}
	if fl.RedisURL == "" {
		fmt.Fprintf(stderr, "outbound breaker: name one pod with --pod URL, or set %s and %s as the service's pods have them to override every pod\n",
			config.FleetRedisURLVar, config.FleetNamespaceVar)
		return exitUsage
	}
	state, until := observe.BreakerState(""), time.Now().Add(o.d)
	switch o.state {
	case "open":
		state = observe.BreakerOpen
	case "closed":
		state = observe.BreakerClosed
	}
	cfg := fleet.Config{RedisURL: fl.RedisURL, Namespace: fl.Namespace}
	if err := fleet.Force(ctx, cfg, o.system, state, until); err != nil {
		fmt.Fprintf(stderr, "outbound breaker: %v\n", err)
		return exitInvalid
	}
	if state == "" {
		fmt.Fprintf(stdout, "%s: breaker released to its own judgement on every pod of %s\n", o.system, fl.Namespace)
	} else {
		fmt.Fprintf(stdout, "%s: breaker forced %s on every pod of %s until %s\n", o.system, state, fl.Namespace, until.UTC().Format(time.RFC3339))
	}
	return exitOK
}

// override is what an operator asks of a system's breaker.
type override struct {
	system, state string // state: open, closed or auto
	d             time.Duration
}

// postControl asks the pod's controls for the override and returns the
// system's status it answers with.
func postControl(ctx context.Context, pod string, o override) (string, error) {
	system, state, d := o.system, o.state, o.d
	u, err := url.Parse(strings.TrimSuffix(pod, "/") + "/breaker/" + url.PathEscape(system))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", errors.New("--pod must be an http(s) URL")
	}
	q := url.Values{"state": {state}}
	if state != "auto" {
		q.Set("for", d.String())
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// reorder puts flags before positional arguments, so that
// `outbound breaker payments open --for 10m` parses as flag users expect.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			flags = append(flags, a)
		case strings.HasPrefix(a, "-") && i+1 < len(args):
			flags = append(flags, a, args[i+1])
			i++
		default:
			pos = append(pos, a)
		}
	}
	return append(flags, pos...)
}
