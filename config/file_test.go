package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// A settings file reads as `outbound env --format dotenv` writes it:
// comments, blank lines, KEY=VALUE with the value as given, quotes
// optional; its version is the hash of its content.
func TestSettingsFileReadsDotenvLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings")
	content := "# retuned live\n\nPAYMENTS_RETRIES=2\nexport PAYMENTS_READ_TIMEOUT = 5s \n" +
		"PAYMENTS_ROUTE_CHARGES_MATCH=POST /v1/charges\nPAYMENTS_BASE_URL=\"https://pay.internal/v1\"\nX_RAW='a \"b\"'\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	want := map[string]string{"PAYMENTS_RETRIES": "2", "PAYMENTS_READ_TIMEOUT": "5s", "PAYMENTS_ROUTE_CHARGES_MATCH": "POST /v1/charges",
		"PAYMENTS_BASE_URL": "https://pay.internal/v1", "X_RAW": `a "b"`}
	if len(f.Vars) != len(want) {
		t.Errorf("vars %v, want %v", f.Vars, want)
	}
	for k, v := range want {
		if f.Vars[k] != v {
			t.Errorf("%s = %q, want %q", k, f.Vars[k], v)
		}
	}
	g, _ := config.ParseFile(path, []byte(content+"\n"))
	if len(f.Version) != 12 || f.Version == g.Version {
		t.Errorf("versions %q and %q: want 12 hex digits that differ with the content", f.Version, g.Version)
	}
	env := f.Over(map[string]string{"PAYMENTS_RETRIES": "0", "OTHER": "x"})
	if env["PAYMENTS_RETRIES"] != "2" || env["OTHER"] != "x" {
		t.Errorf("over the environment: %v; want the file's value over the env's, the env's others kept", env)
	}
}

// Every bad line of a settings file is a problem naming its line, in one
// report, with no value shown.
func TestSettingsFileProblemsNameTheirLines(t *testing.T) {
	t.Parallel()
	_, err := config.ParseFile("settings", []byte("PAYMENTS_RETRIES=2\nnot a line\nlower=1\nPAYMENTS_RETRIES=3\nPAYMENTS_X=\"open\nPAYMENTS_TOKEN=s3cret \"\n"))
	if err == nil {
		t.Fatal("no problem")
	}
	for _, want := range []string{
		"OUTBOUND_CONFIG_FILE=settings: line 2 of settings: not KEY=VALUE",
		"line 3 of settings: the key is not a variable name",
		"PAYMENTS_RETRIES=: line 4 of settings: set again (first on line 1)",
		"PAYMENTS_X=: line 5 of settings: a quoted value must end with its quote",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("report lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "open") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a value shows in the report:\n%v", err)
	}
	if _, err := config.ReadFile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing file: %v", err)
	}
}
