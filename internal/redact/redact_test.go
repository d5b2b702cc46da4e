package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestURLPolicies(t *testing.T) {
	const in = "https://u:p4ss@h/x?page=2&jwt=eyJ&Limit=5&otp=123#frag"
	for _, tc := range []struct {
		name string
		got  string
		hide []string
		keep []string
	}{
		{"URL", URL(in), []string{"p4ss", "eyJ", "123", "frag", "u:"}, []string{"page=2", "Limit=5", "jwt=REDACTED", "h/x"}},
		{"BaseURL", BaseURL(in), []string{"p4ss", "eyJ", "123", "frag", "page=2", "Limit=5"}, []string{"page=REDACTED", "h/x"}},
	} {
		for _, h := range tc.hide {
			if strings.Contains(tc.got, h) {
				t.Errorf("%s = %q shows %q", tc.name, tc.got, h)
			}
		}
		for _, k := range tc.keep {
			if !strings.Contains(tc.got, k) {
				t.Errorf("%s = %q lost %q", tc.name, tc.got, k)
			}
		}
	}
	// Nothing to hide: unchanged, byte for byte.
	for _, s := range []string{"", "https://h/x", "https://h/x?page=2&limit=a+b", "http://[::1]:8080/"} {
		if got := URL(s); got != s {
			t.Errorf("URL(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestUserinfoOutsideAuthority(t *testing.T) {
	for s, want := range map[string]bool{
		"https://user:12/secret@host/v1":    true,
		"https://user:12?secret@host/v1":    true,
		"https://user:12#secret@host/v1":    true,
		"https://user:p%2Fw@host/v1":        false, // encoded: real userinfo
		"https://registry.npmjs.org/@types": false,
		"https://host/v1":                   false,
		"user:pass@host":                    false, // no "//": opaque, handled apart
	} {
		if got := UserinfoOutsideAuthority(s); got != want {
			t.Errorf("UserinfoOutsideAuthority(%q) = %v, want %v", s, got, want)
		}
	}
	if got := BaseURL("https://user:12/secret@host/v1"); strings.Contains(got, "secret") || strings.Contains(got, "user") {
		t.Errorf("BaseURL shows the password: %q", got)
	}
	// A request URL that parses is what was requested: host api, a path
	// with an '@'.
	if got, want := URL("https://api:8443/users/me@example.com"), "https://api:8443/users/me@example.com"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain value":   "plain value",
		"é and ü":       "é and ü",
		"a\r\nb":        `"a\r\nb"`,
		"\x1b[2J":       `"\x1b[2J"`,
		"tab\there":     `"tab\there"`,
		"bad \xff utf8": `"bad \xff utf8"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestBaseURLShowsOnlyWhatItCanRedact: text that is no URL with a scheme
// and "//" is shown only when it is a bare host and port; a password
// pasted alone, or after a scheme without "//", is replaced whole.
func TestBaseURLShowsOnlyWhatItCanRedact(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"S3cret":                    Mark,
		":S3cret":                   Mark,
		"redis:S3cret":              Mark,
		"user:S3cret@host":          Mark,
		"redis:/S3cret":             Mark,
		"%zzS3cret":                 Mark,
		"pay.internal:8443":         "pay.internal:8443",
		"pay.internal:8443/v1":      "pay.internal:8443/v1",
		"10.0.0.7:80":               "10.0.0.7:80",
		"[::1]:8443":                "[::1]:8443",
		"pay.internal:8443/v1?k=S3": Mark,
		"pay.internal:8443/@S3":     Mark,
		"https://u:S3cret@h/v1?a=1": "https://REDACTED@h/v1?a=REDACTED",
		"https://u:p%zzS3cret@h/v1": "https://REDACTED@h/v1",
		"rediss://:S3cret@r:6380/0": "rediss://REDACTED@r:6380/0",
		// No host, no '@': the password is where url.Parse wants a port.
		"redis://default:S3cret":    "redis://REDACTED",
		"rediss://:S3cret":          "rediss://REDACTED",
		"https://apiuser:S3cret":    "https://REDACTED",
		"https://apiuser:S3cret/v1": "https://REDACTED",
	} {
		if got := BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedisURLShowsTheClusterNodes: the fleet's Redis URL hides its
// password and every query value as BaseURL does, but for cluster= and
// the addr= values that are a host and port: the nodes of a cluster are
// no secret, and an addr= that is anything else may be a pasted password.
func TestRedisURLShowsTheClusterNodes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:pw@r0:6379?cluster=true&addr=r1:6379&addr=r2:6379",
			"redis://REDACTED@r0:6379?addr=r1%3A6379&addr=r2%3A6379&cluster=true"},
		{"rediss://u:pw@r0:6379?addr=pw@r1:6379&cluster=true&dial_timeout=pw",
			"rediss://REDACTED@r0:6379?addr=REDACTED&cluster=true&dial_timeout=REDACTED"},
		{"redis://r0:6379?cluster=yes", "redis://r0:6379?cluster=REDACTED"},
		{"redis://r0:6379/0", "redis://r0:6379/0"},
		{"redis:S3cret", Mark},
		{"redis://default:S3cret", "redis://REDACTED"},
		{"rediss://:S3cret?cluster=true", "rediss://REDACTED"},
		{"redis://a:b/c@r0:6379?addr=r1:6379", "redis://REDACTED@r0:6379?REDACTED"},
	} {
		if got := RedisURL(tc.in); got != tc.want {
			t.Errorf("RedisURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClipBoundsAValueAndSaysHowLongItWas(t *testing.T) {
	if got := Clip("short"); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
	big := strings.Repeat("a", 1<<20)
	if got, want := Clip(big), strings.Repeat("a", MaxShown)+"… (1048576 bytes)"; got != want {
		t.Errorf("Clip(1 MiB) = %q…, want %q…", got[:20], want[:20])
	}
	// Cut on a rune boundary: é is two bytes.
	got := Clip("a" + strings.Repeat("é", MaxShown))
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "… (401 bytes)") || len(got) > MaxShown+len("… (401 bytes)") {
		t.Errorf("Clip(runes) = %q", got)
	}
}
