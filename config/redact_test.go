package config_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

func TestRedaction(t *testing.T) {
	t.Parallel()
	const secretURL = "https://user:s3cret@host/x?token=abc&api_key=k&page=2"
	secrets := []string{"s3cret", "user", "abc", "token=abc", "api_key=k"}

	cases := []struct {
		name    string
		baseURL string
		other   map[string]string
		wantVar string // the problem expected on BASE_URL, if any
	}{
		{"good url, other field bad", secretURL, map[string]string{"CALL_TIMEOUT": "3s"}, ""},
		{"url with fragment", secretURL + "#frag", map[string]string{"READ_TIMEOUT": "0"}, "PAYMENTS_BASE_URL"},
		{"ftp url", strings.Replace(secretURL, "https", "ftp", 1), map[string]string{"RETRIES": "11"}, "PAYMENTS_BASE_URL"},
		{"url with cert on http", strings.Replace(secretURL, "https", "http", 1), map[string]string{"TLS_CERT_FILE": "c", "TLS_KEY_FILE": "k.pem"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"BASE_URL": tc.baseURL}
			for k, v := range tc.other {
				env[k] = v
			}
			lenv := prefixed("PAYMENTS", env)
			ls, err := config.LoadEnv(lenv, config.System{Name: "payments"})
			probs := problemsOf(t, err)
			if len(probs) == 0 {
				t.Fatal("no problems")
			}
			if tc.wantVar != "" {
				p, ok := findVar(probs, tc.wantVar)
				if !ok {
					t.Fatalf("no problem on %s:%s", tc.wantVar, dump(probs))
				}
				// Every query value of a BASE_URL is hidden, whatever its name.
				if !strings.Contains(p.Value, "page=REDACTED") || !strings.Contains(p.Value, "REDACTED@host") {
					t.Errorf("BASE_URL value %q: want every query value and the userinfo REDACTED", p.Value)
				}
			}
			assertNoSecrets(t, "err.Error()", err.Error(), secrets...)
			for _, p := range probs {
				assertNoSecrets(t, "Problem.Value", p.Value, secrets...)
			}
			if len(ls) != 1 {
				t.Fatalf("loaded %d", len(ls))
			}
			sum := ls[0].Summary()
			assertNoSecrets(t, "Summary()", sum, secrets...)
			if !strings.Contains(sum, "page=REDACTED") || !strings.Contains(sum, "REDACTED@host/x") {
				t.Errorf("Summary() = %q, want the host kept and page=REDACTED", sum)
			}
			for _, v := range ls[0].Vars() {
				assertNoSecrets(t, "Vars() "+v.Name, fmt.Sprintf("%+v", v), secrets...)
			}
			for _, v := range config.Reference(config.System{Name: "payments", Defaults: config.Client{BaseURL: tc.baseURL}}) {
				assertNoSecrets(t, "Reference() "+v.Name, fmt.Sprintf("%+v", v), secrets...)
			}
		})
	}

	t.Run("base url from code", func(t *testing.T) {

		t.Parallel()
		ls, err := config.Load(config.System{Name: "payments", Defaults: config.Client{BaseURL: secretURL + "#x"}})
		assertNoSecrets(t, "err.Error()", fmt.Sprint(err), secrets...)
		if err == nil {
			t.Fatal("a fragment in a code BASE_URL is not reported")
		}
		assertNoSecrets(t, "Summary()", ls[0].Summary(), secrets...)
	})

	t.Run("RedactURL", func(t *testing.T) {

		t.Parallel()
		cases := []struct {
			in      string
			secrets []string
			keep    []string
		}{
			{secretURL, []string{"s3cret", "user", "abc", "=k"}, []string{"https://", "host/x", "page=2"}},
			{"https://host/x?password=p4ss&Session=s355&sig=s1g&code=c0de&region=eu", []string{"p4ss", "s355", "s1g", "c0de"}, []string{"region=eu"}},
			{"https://user@host/", []string{"user"}, []string{"host"}},
			{"https://host/x#access_token=t0k", []string{"t0k"}, []string{"host/x"}},
			// Does not parse (bad escape, missing bracket, bad port):
			// userinfo redacted, query dropped.
			{"https://user:s3cret@host/%zz?token=abc", []string{"s3cret", "user", "abc"}, []string{"host"}},
			{"http://user:s3cret@[::1", []string{"s3cret", "user"}, []string{"[::1"}},
			{"https://user:s3cret@host:port/x", []string{"s3cret", "user"}, []string{"host:port"}},
			{"https://user:s3c/ret@host/x", []string{"s3c", "ret", "user"}, []string{"host/x"}},
			{"https://user:s3c#ret@host/x", []string{"s3c", "ret", "user"}, []string{"host"}},
			{"https://user:s3c?ret@host/x", []string{"s3c", "ret", "user"}, []string{"host"}},
			{"https://user:s3c%ret@host/x", []string{"s3c", "ret", "user"}, []string{"host/x"}},
			{"https://user:a@b@c/x", []string{"user", "a@b"}, []string{"c/x"}},
			// Opaque: "user:pass@host" parses as scheme "user".
			{"user:s3cret@host", []string{"s3cret", "user"}, []string{"host"}},
			{"user:s3cret@host:5432/db", []string{"s3cret", "user"}, []string{"host:5432"}},
			{"https://host/x?token=abc;x", []string{"abc"}, []string{"host/x"}},
		}
		for _, tc := range cases {
			got := config.RedactURL(tc.in)
			assertNoSecrets(t, fmt.Sprintf("RedactURL(%q)", tc.in), got, tc.secrets...)
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Errorf("RedactURL(%q) = %q, lost %q", tc.in, got, k)
				}
			}
		}
		for _, s := range []string{"", goodURL, "https://h/x?page=2&limit=a+b", "http://[::1]:8080/"} {
			if got := config.RedactURL(s); got != s {
				t.Errorf("RedactURL(%q) = %q, want it unchanged", s, got)
			}
		}
	})

	t.Run("unparseable url through Load", func(t *testing.T) {

		t.Parallel()
		lenv := map[string]string{"PAYMENTS_BASE_URL": "https://user:s3c/ret@payments.internal/v1"}
		_, err := config.LoadEnv(lenv, config.System{Name: "payments"})
		if err == nil {
			t.Fatal("no error")
		}
		assertNoSecrets(t, "err.Error()", err.Error(), "s3c", "ret@", "user")
	})
}

// TestBaseURLQueryValuesAreAllRedacted: no list of secret parameter
// names is complete (jwt, bearer, otp, hash, private, ...), so every query
// value of a BASE_URL is redacted in every output; in request URLs, every
// value whose name is not known to be safe.
func TestBaseURLQueryValuesAreAllRedacted(t *testing.T) {
	t.Parallel()
	names := []string{"jwt", "bearer", "otp", "hash", "private", "x-amz-credential", "apikey", "state", "nonce"}
	var q []string
	var secrets []string
	for i, n := range names {
		v := fmt.Sprintf("s3cr3t%d", i)
		q = append(q, n+"="+v)
		secrets = append(secrets, v)
	}
	base := "https://payments.internal/v1?" + strings.Join(q, "&") + "&page=2"
	ls, probs, err := loadEnv(t, map[string]string{
		"PAYMENTS_BASE_URL":     base,
		"PAYMENTS_READ_TIMEOUT": "0", // for an error to print
	}, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	outputs := map[string]string{
		"err":     err.Error(),
		"Summary": ls[0].Summary(),
		"%v":      fmt.Sprintf("%v", ls[0]),
		"%#v":     fmt.Sprintf("%#v", ls[0].Client),
		"Vars":    fmt.Sprintf("%+v", ls[0].Vars()),
		"probs":   fmt.Sprintf("%+v", probs),
	}
	for where, s := range outputs {
		assertNoSecrets(t, where, s, secrets...)
		assertNoSecrets(t, where, s, "page=2") // a BASE_URL hides even safe names
	}
	if !strings.Contains(ls[0].Summary(), "payments.internal/v1?") {
		t.Errorf("Summary lost the host: %s", ls[0].Summary())
	}

	// A request URL keeps the values of known-safe names only.
	got := config.RedactURL("https://h/x?" + strings.Join(q, "&") + "&page=2&LIMIT=5")
	assertNoSecrets(t, "RedactURL", got, secrets...)
	for _, keep := range []string{"page=2", "LIMIT=5", "jwt=REDACTED"} {
		if !strings.Contains(got, keep) {
			t.Errorf("RedactURL = %q, want %q kept", got, keep)
		}
	}
}

// TestBaseURLPasswordWithUnencodedDelimiterIsRefused:
// "https://user:12/secret@host/v1" parses as host "user", port 12. Such a
// URL is refused, with a hint to percent-encode, and the password is never
// echoed.
func TestBaseURLPasswordWithUnencodedDelimiterIsRefused(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://user:12/secret@payments.internal/v1",
		"https://user:12?secret@payments.internal/v1",
		"https://user:12#secret@payments.internal/v1",
		"https://user:12/se/cret@payments.internal/v1",
		"https://user:pa/secret@payments.internal/v1",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			ls, probs, err := loadEnv(t, map[string]string{"PAYMENTS_BASE_URL": u}, config.System{Name: "payments"})
			p, ok := findVar(probs, "PAYMENTS_BASE_URL")
			if !ok {
				t.Fatalf("not refused:%s", dump(probs))
			}
			if !strings.Contains(p.Rule, "percent-encode") {
				t.Errorf("rule %q does not say to percent-encode", p.Rule)
			}
			for where, s := range map[string]string{"err": err.Error(), "Summary": ls[0].Summary(), "Value": p.Value} {
				assertNoSecrets(t, where, s, "secret", "user", ":12")
			}
		})
	}
	// An '@' in the path of a URL without a port is not userinfo.
	_, probs, _ := loadEnv(t, map[string]string{"PAYMENTS_BASE_URL": "https://registry.npmjs.org/@types"}, config.System{Name: "payments"})
	if len(probs) != 0 {
		t.Errorf("an '@' in the path is refused:%s", dump(probs))
	}
}

// TestShownValuesQuoteControlCharacters: a CR, LF or ANSI escape in a
// value would forge lines of a report or steer a terminal; every shown value
// holding a control character is quoted, one line per problem.
func TestShownValuesQuoteControlCharacters(t *testing.T) {
	t.Parallel()
	const forged = "\r\nPAYMENTS_FAKE=ok: all good\x1b[2J"
	env := map[string]string{
		"PAYMENTS_BASE_URL":         "https://payments.internal/v1" + forged,
		"PAYMENTS_READ_TIMEOUT":     "5s" + forged,
		"PAYMENTS_FOLLOW_REDIRECTS": "any" + forged,
		"PAYMENTS_TLS_CA_FILE":      "/nonexistent" + forged,
		"PAYMENTS_CONECT_TIMEOUT":   "1s",
	}
	ls, probs, err := loadEnv(t, env, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\x1b") {
		t.Errorf("error holds a CR or an ESC:\n%q", msg)
	}
	if got, want := strings.Count(msg, "\n"), len(probs); got != want {
		t.Errorf("error has %d line breaks, want %d (one per problem):\n%s", got, want, msg)
	}
	for _, s := range []string{ls[0].Summary(), ls[0].String(), fmt.Sprintf("%+v", ls[0].Client)} {
		if strings.ContainsAny(s, "\r\n\x1b") {
			t.Errorf("output holds a control character:\n%q", s)
		}
	}
}

// TestNoPrintedFormShowsSecrets: every exported type that holds settings
// is printed with %v, %+v, %#v, slog (text and JSON) and encoding/json, and
// none shows the BASE_URL's credentials or a private key.
func TestNoPrintedFormShowsSecrets(t *testing.T) {
	const base = "https://alice:pa55w0rd@payments.internal/v1?jwt=eyJhbGciOi"
	secrets := []string{"pa55w0rd", "alice", "eyJhbGciOi"}
	ls, err := config.LoadEnv(map[string]string{
		"PAYMENTS_BASE_URL":     base,
		"PAYMENTS_READ_TIMEOUT": "0",
	}, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	key, err2 := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err2 != nil {
		t.Fatal(err2)
	}
	kb, err2 := key.Bytes()
	if err2 != nil {
		t.Fatal(err2)
	}
	d := new(big.Int).SetBytes(kb) // how %v prints the private scalar
	secrets = append(secrets, d.String(), d.Text(16))
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("err is %T", err)
	}
	values := map[string]any{
		"Client":   ls[0].Client,
		"*Client":  &ls[0].Client,
		"Loaded":   ls[0],
		"[]Loaded": ls,
		"System":   config.System{Name: "payments", Defaults: config.Client{BaseURL: base}},
		"Problem":  cerr.Problems[0],
		"*Error":   cerr,
		"[]Var":    ls[0].Vars(),
		"TLSFiles": config.TLSFiles{CAPEM: []byte("ca"), Cert: &tls.Certificate{PrivateKey: key}},
	}
	for name, v := range values {
		outs := map[string]string{
			"%v":  fmt.Sprintf("%v", v),
			"%+v": fmt.Sprintf("%+v", v),
			"%#v": fmt.Sprintf("%#v", v),
		}
		for _, h := range []struct {
			name string
			new  func(*bytes.Buffer) slog.Handler
		}{
			{"slog text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
			{"slog json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		} {
			var buf bytes.Buffer
			slog.New(h.new(&buf)).Info("x", "v", v)
			outs[h.name] = buf.String()
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%s: json.Marshal: %v", name, err)
		}
		outs["json"] = string(js)
		for how, s := range outs {
			assertNoSecrets(t, name+" "+how, s, secrets...)
		}
	}
}

// Printing or logging a Client never shows the credentials of BASE_URL.
func TestClientStringRedacts(t *testing.T) {
	c := config.Baseline()
	c.BaseURL = "https://user:s3cret@pay.internal/v1?token=abc"
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("cfg", "client", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), c.String(), b.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "abc") || !strings.Contains(out, "pay.internal") {
			t.Errorf("not redacted: %s", out)
		}
	}
}

// A Loaded, printed or logged, never shows the credentials of BASE_URL,
// even though it keeps the environment's text for its problems.
func TestLoadedPrintRedacts(t *testing.T) {
	setEnv(t, map[string]string{
		"OUTBOUND_SYSTEMS": "payments", "PAYMENTS_BASE_URL": "https://tok:s3cret@pay.internal/v1?api_key=K3Y",
	})
	ls, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("sys", "loaded", ls[0], "client", ls[0].Client)
	for _, out := range []string{fmt.Sprintf("%v", ls[0]), fmt.Sprintf("%+v", ls[0]), fmt.Sprintf("%#v", ls[0].Client), b.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "K3Y") || strings.Contains(out, "tok:") {
			t.Errorf("not redacted: %s", out)
		}
	}
}

// TestSecretVariableShowsOnlyWhatItCanRedact: the value of a secret
// variable (BASE_URL, OUTBOUND_FLEET_REDIS_URL) is shown only when it
// parses as a URL whose password can be hidden, or is a bare host and
// port. A password pasted alone, or after a scheme without "//", is
// never echoed: not in the problem, the summary, Vars, the printed
// forms nor JSON.
func TestSecretVariableShowsOnlyWhatItCanRedact(t *testing.T) {
	t.Parallel()
	const pw = "S3cret"
	for _, v := range []string{pw, ":" + pw, "redis:" + pw, "rediss:" + pw, "https:" + pw, "user:" + pw + "@", pw + "@", "redis:/" + pw,
		"redis:" + pw + "?x", "%zz" + pw, "redis:" + pw + ":6379", "[" + pw, pw + " with spaces"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			_, err := config.LoadEnv(map[string]string{
				"PAYMENTS_BASE_URL":      v,
				config.FleetRedisURLVar:  v,
				config.FleetNamespaceVar: "checkout",
			}, config.System{Name: "payments"})
			probs := problemsOf(t, err)
			for _, name := range []string{"PAYMENTS_BASE_URL", config.FleetRedisURLVar} {
				p, ok := findVar(probs, name)
				if !ok {
					t.Errorf("%s=%q not refused:%s", name, v, dump(probs))
					continue
				}
				assertNoSecrets(t, name+" problem", p.Error(), pw)
			}
			assertNoSecrets(t, "report", err.Error(), pw)
			assertNoSecrets(t, "Fleet", fmt.Sprintf("%v %+v %#v", config.Fleet{RedisURL: v}, config.Fleet{RedisURL: v}, config.Fleet{RedisURL: v}), pw)
			c := config.Baseline()
			c.BaseURL = v
			js, _ := json.Marshal(c)
			assertNoSecrets(t, "Client", fmt.Sprintf("%v %+v %#v %s", c, c, c, js), pw)
		})
	}
}

// TestHostAndPortAreNoSecret: a BASE_URL written as host:port, its scheme
// forgotten, is shown as written (a host and a port are no secret), and
// the problem says that the scheme is missing.
func TestHostAndPortAreNoSecret(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"pay.internal:8443", "pay.internal:8443/v1", "10.0.0.7:80", "[::1]:8443"} {
		_, probs := loadPayments(t, config.Client{}, map[string]string{"BASE_URL": v})
		want := "PAYMENTS_BASE_URL=" + v + ": the scheme is missing: start it with https:// or http://"
		if len(probs) != 1 || probs[0].Error() != want {
			t.Errorf("BASE_URL=%s:%s\nwant\n\t%s", v, dump(probs), want)
		}
	}
	_, err := config.LoadEnv(map[string]string{
		"PAYMENTS_BASE_URL": goodURL, config.FleetRedisURLVar: "redis.internal:6379", config.FleetNamespaceVar: "checkout",
	}, config.System{Name: "payments"})
	if p, _ := findVar(problemsOf(t, err), config.FleetRedisURLVar); p.Value != "redis.internal:6379" || !strings.Contains(p.Rule, "scheme is missing") {
		t.Errorf("%s=redis.internal:6379: got %q, want the value shown and the scheme said missing", config.FleetRedisURLVar, p.Error())
	}
}
