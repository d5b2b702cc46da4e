package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/observe"
	"github.com/outbound-go/outbound/statuspage"
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
	token := fs.String("token", os.Getenv(statuspage.TokenVar), "bearer token of the pod's controls (statuspage.WithToken); default $"+statuspage.TokenVar+", which keeps it out of the process list")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: outbound breaker SYSTEM open|closed|auto [--for 15m] [--pod URL [--token T]]

Forces a system's breaker for an operator: open refuses every call with
no I/O (reason forced-open), closed lets every call through whatever the
evidence, auto releases it to the breaker's own judgement. The override
ends by itself after --for unless renewed.

With --pod, the override goes to that pod's controls; at
BREAKER_SCOPE=fleet the pod writes it to the fleet's Redis and every pod
applies it. A redirect is not followed (it is an error), and what the
pod answers is printed on one line with control characters escaped. Without --pod, it is written to the fleet's Redis directly,
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
	line, err := postControl(ctx, *pod, *token, o)
	if err != nil {
		fmt.Fprintf(stderr, "outbound breaker: %v\n", err)
		return exitInvalid
	}
	fmt.Fprintln(stdout, line)
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

// postControl asks the pod's controls for the override and returns one
// line saying what the pod took. It follows no redirect: a pod that
// answers with one is refused, so that the override is sent to no other
// host.
func postControl(ctx context.Context, pod, token string, o override) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(pod, "/") + "/breaker/" + url.PathEscape(o.system))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("--pod must be an http(s) URL")
	}
	at := strings.TrimSuffix(pod, "/")
	if p, err := url.Parse(at); err == nil {
		at = p.Redacted()
	}
	q := url.Values{"state": {o.state}}
	if o.state != "auto" {
		q.Set("for", o.d.String())
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(statuspage.ControlHeader, "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := cl.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the URL, which may hold userinfo
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", at, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return "", fmt.Errorf("%s answered %s to %s: not followed, the override is sent to the pod only",
			at, escape(resp.Status), escape(resp.Header.Get("Location")))
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s answered %s: %s", at, escape(resp.Status), escape(string(b)))
	}
	return tookLine(at, o, b)
}

// tookLine reads the system's status the pod answered with and says in
// one line what the pod took; an answer that does not show the override
// asked for is an error.
func tookLine(at string, o override, body []byte) (string, error) {
	var st observe.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("%s answered 200 without a status: %s", at, escape(string(body)))
	}
	if o.state == "auto" {
		if st.Forced != nil {
			return "", fmt.Errorf("%s answered 200 but %s's breaker is still forced %s", at, escape(o.system), escape(string(st.Forced.State)))
		}
		return fmt.Sprintf("%s: breaker released to its own judgement on %s, now %s", escape(o.system), at, escape(string(st.Breaker))), nil
	}
	if st.Forced == nil || string(st.Forced.State) != o.state {
		return "", fmt.Errorf("%s answered 200 but %s's breaker is not forced %s", at, escape(o.system), o.state)
	}
	return fmt.Sprintf("%s: breaker forced %s on %s until %s", escape(o.system), o.state, at, st.Forced.Until.UTC().Format(time.RFC3339)), nil
}

// maxShown is how much of what a pod answers is shown at most.
const maxShown = 200

// escape makes s, which came from elsewhere, safe for a terminal: one
// line, every control or format character (escape sequences, newlines,
// bidirectional overrides) written as a Go escape, invalid UTF-8 as
// \ufffd, cut to maxShown bytes with the length said.
func escape(s string) string {
	s = strings.TrimSpace(s)
	n := len(s)
	if n > maxShown {
		s = s[:maxShown]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\ufffd") {
		if unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	if n > maxShown {
		fmt.Fprintf(&b, "... (%d bytes)", n)
	}
	return b.String()
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
