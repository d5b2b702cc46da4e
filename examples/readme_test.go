// Package examples holds no code of its own: its test compiles every Go
// block of the repository's README.md, and runs the quick start, so that
// what a newcomer copies builds against the current API.
package examples

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/outbound-go/outbound/adapters"
	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
	"github.com/outbound-go/outbound/fleet"
	"github.com/outbound-go/outbound/health"
	"github.com/outbound-go/outbound/metrics"
	"github.com/outbound-go/outbound/observe"
	outboundotel "github.com/outbound-go/outbound/otel"
	"github.com/outbound-go/outbound/outboundtest"
	"github.com/outbound-go/outbound/outboundtest/registrytest"
	"github.com/outbound-go/outbound/registry"
	"github.com/outbound-go/outbound/statuspage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readmePath is the README, from this package's directory.
const readmePath = "../README.md"

// The import block above is also the list of packages the README's
// fragments may use, by the name it gives them (an alias, or the last
// element of the path). The blank variable below uses a name of each package the test
// does not use itself, so that this file imports it: the examples module
// then requires its module (go mod tidy keeps it), and the go command has
// it in its cache before the snippets are compiled with the network off.
// A fragment that uses another package fails with "undefined: name" at
// its README line; add the package's import here.
var _ = []any{adapters.Degradable, inventory.New, config.Load, configcheck.Main, fleet.FromEnv,
	health.Liveness, metrics.New, observe.WithRoute, outboundotel.New, outboundtest.Healthy,
	registrytest.New, registry.FromEnv, statuspage.NewRecorder, prometheus.NewRegistry, slog.Default,
	io.ReadAll, time.Now}

// TestREADMEGoBlocksCompileAndProgramsRun compiles every ```go block of README.md, each
// as a package of its own, in one `go build` of the examples module (with
// -race when this test runs with it, so that the dependencies come from
// the build cache) and GOPROXY=off: nothing is downloaded.
//
// A block that starts with a package clause is a complete file and is
// compiled as it is. Any other block is a fragment, wrapped: top-level
// declarations (functions, types, variables) get a package clause
// (package main when they declare func main) and the imports of the
// package names they use; statements are put in the body of a function
// first. The imports come from this file's import block.
// Every block starts with a //line directive, so that a compiler error
// names README.md and the block's own line.
//
// It then runs every complete program (a block that declares func
// main), each found in [programs] by a line of its own, against a
// loopback upstream with a bounded time, and checks what it prints and
// its exit code. A program no entry of programs runs fails the test.
func TestREADMEGoBlocksCompileAndProgramsRun(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	allowed, err := ownImports()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, overlay := make([]string, 0, len(blocks)), map[string]string{}
	var mains []int // indexes in blocks and pkgs of the programs
	tmp, wd := t.TempDir(), mustGetwd(t)
	for _, b := range blocks {
		src, err := wrap(b, allowed)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		if isMain(src) {
			mains = append(mains, len(pkgs))
		}
		dir := fmt.Sprintf("./internal/readme/line%04d", b.line)
		file := filepath.Join(tmp, fmt.Sprintf("line%04d.go", b.line))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(wd, dir, "snippet.go")] = file
		pkgs = append(pkgs, dir)
	}
	if t.Failed() {
		return
	}
	ovl := writeOverlay(t, tmp, overlay)
	// Without -o, go build compiles every package; with -o a directory,
	// it would skip the ones that are not main.
	if out, err := goCmd(append([]string{"build", "-overlay", ovl}, pkgs...)...); err != nil {
		t.Fatalf("the README's Go blocks do not compile (%v); README.md:N is the line in the README:\n%s", err, out)
	}
	for _, i := range mains {
		b := blocks[i]
		var run []program
		for _, p := range programs {
			if strings.Contains(b.code, p.marker) {
				run = append(run, p)
			}
		}
		if len(run) != 1 {
			t.Errorf("README.md:%d: a program that %d entries of programs run, want 1: add one, with a line of its own as marker", b.line, len(run))
			continue
		}
		t.Run(run[0].name, func(t *testing.T) {
			bin := filepath.Join(tmp, fmt.Sprintf("line%04d", b.line))
			if out, err := goCmd("build", "-overlay", ovl, "-o", bin, pkgs[i]); err != nil {
				t.Fatalf("building README.md:%d: %v\n%s", b.line, err, out)
			}
			run[0].run(t, bin)
		})
	}
}

// program runs one of the README's programs: the block that holds marker.
type program struct {
	name, marker string
	run          func(t *testing.T, bin string)
}

// programs are the README's complete programs, each with what it must do.
var programs = []program{
	{"quick start runs", `"stock/42"`, quickStart},
	{"check-config runs", `"check-config"`, checkConfig},
}

// block is one ```go block of the README: its text and the README line
// of its first line.
type block struct {
	line int
	code string
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) []block {
	var (
		out  []block
		cur  *block
		body strings.Builder
	)
	for i, l := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &block{line: i + 2}
			body.Reset()
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.code = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(l)
			body.WriteByte('\n')
		}
	}
	return out
}

// ownImports returns the packages this file imports, by the name they
// are used under.
func ownImports() (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "readme_test.go", nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, spec := range f.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		name := filepath.Base(path)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		m[name] = path
	}
	return m, nil
}

// wrap returns the Go file that b compiles as (see
// TestREADMEGoBlocksCompileAndProgramsRun).
func wrap(b block, allowed map[string]string) (string, error) {
	directive := fmt.Sprintf("//line README.md:%d:1\n", b.line)
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", b.code, parser.ImportsOnly); err == nil {
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			if strings.Contains(strings.Split(path, "/")[0], ".") && !allowedPath(allowed, path) {
				return "", fmt.Errorf("imports %s, which examples/readme_test.go does not: add it to its import block", path)
			}
		}
		return directive + b.code, nil
	}
	body := directive + b.code
	f, err := parser.ParseFile(fset, "README.md", "package p\n"+body, parser.SkipObjectResolution)
	if err != nil {
		body = "func _() {\n" + directive + b.code + "}\n"
		if f, err = parser.ParseFile(fset, "README.md", "package p\n"+body, parser.SkipObjectResolution); err != nil {
			return "", fmt.Errorf("neither a Go file nor declarations nor statements: %v", err)
		}
	}
	pkg := "snippet"
	if declaresMain(f) {
		pkg = "main"
	}
	var imports strings.Builder
	for _, name := range undefined(fset, f) {
		if path, ok := allowed[name]; ok {
			fmt.Fprintf(&imports, "import %s %q\n", name, path)
		}
	}
	return "package " + pkg + "\n\n" + imports.String() + "\n" + body, nil
}

// allowedPath reports whether path is one of the packages of allowed.
func allowedPath(allowed map[string]string, path string) bool {
	for _, p := range allowed {
		if p == path {
			return true
		}
	}
	return false
}

// isMain reports whether src, a wrapped block, is a program: package main.
func isMain(src string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly)
	return err == nil && f.Name.Name == "main"
}

// declaresMain reports whether f declares a function main.
func declaresMain(f *ast.File) bool {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "main" {
			return true
		}
	}
	return false
}

// undefined returns the names f uses without declaring them, sorted: the
// type checker's "undefined: name" errors, since f imports nothing.
func undefined(fset *token.FileSet, f *ast.File) []string {
	names := map[string]bool{}
	conf := types.Config{Error: func(err error) {
		var te types.Error
		if errors.As(err, &te) {
			if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok {
				names[name] = true
			}
		}
	}}
	_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// writeOverlay writes the -overlay file of the go command that puts each
// file of overlay (real path -> file) in place, and returns its path.
func writeOverlay(t *testing.T, tmp string, overlay map[string]string) string {
	t.Helper()
	repl := make([]string, 0, len(overlay))
	for real, file := range overlay {
		repl = append(repl, strconv.Quote(real)+":"+strconv.Quote(file))
	}
	ovl := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovl, []byte(`{"Replace":{`+strings.Join(repl, ",")+"}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ovl
}

// goCmd runs the go command with the network off (GOPROXY=off), adding
// -race after a build when this test binary has it, so that the
// dependencies come from the build cache. It returns the command's
// output.
func goCmd(args ...string) (string, error) {
	if raceEnabled() {
		args = slices.Insert(args, 1, "-race")
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// quickStart runs the quick start's binary: against a loopback upstream
// named by INVENTORY_BASE_URL it prints the upstream's answer and exits
// 0; with no BASE_URL it exits 1 and says which variable is missing.
func quickStart(t *testing.T, bin string) {
	hits := make(chan string, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hits <- r.Method + " " + r.URL.Path:
		default:
		}
		fmt.Fprint(w, "7 in stock")
	}))
	defer up.Close()

	out, code := runClean(t, bin, nil, "INVENTORY_BASE_URL="+up.URL+"/v1")
	if code != 0 || !strings.Contains(out, "200 OK 7 in stock") {
		t.Errorf("quick start against a healthy upstream: exit %d, output %q; want 0 and the upstream's answer", code, out)
	}
	var got []string
	for len(hits) > 0 {
		got = append(got, <-hits)
	}
	if want := []string{"GET /v1/stock/42"}; !slices.Equal(got, want) {
		t.Errorf("the upstream got %q, want %q (the path joined to BASE_URL's)", got, want)
	}
	out, code = runClean(t, bin, nil)
	if code != 1 || !strings.Contains(out, "INVENTORY_BASE_URL (unset): required") {
		t.Errorf("quick start with nothing set: exit %d, output %q; want 1 naming INVENTORY_BASE_URL", code, out)
	}
}

// checkConfig runs the check-config program: its code defaults (READ 20s,
// CALL 30s) pass its own check and start its service; a value that breaks
// the rules against them fails both, naming the variable.
func checkConfig(t *testing.T, bin string) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	base := "PAYMENTS_BASE_URL=" + up.URL
	out, code := runClean(t, bin, []string{"check-config"}, base)
	if code != 0 || !strings.Contains(out, "ok   payments ") || !strings.Contains(out, " read=20s call=30s ") ||
		!strings.Contains(out, "1 system, 0 problems") {
		t.Errorf("check-config with the code defaults: exit %d, output %q; want 0, read=20s call=30s, no problem", code, out)
	}
	if out, code := runClean(t, bin, nil, base); code != 0 {
		t.Errorf("the service with the code defaults: exit %d, output %q; want 0", code, out)
	}
	bad := "PAYMENTS_CALL_TIMEOUT=21s" // < connect 2s + read 20s + 1s
	out, code = runClean(t, bin, []string{"check-config"}, base, bad)
	if code != 1 || !strings.Contains(out, "PAYMENTS_CALL_TIMEOUT=21s") {
		t.Errorf("check-config with %s: exit %d, output %q; want 1 naming PAYMENTS_CALL_TIMEOUT", bad, code, out)
	}
	if out, code := runClean(t, bin, nil, base, bad); code != 1 || !strings.Contains(out, "PAYMENTS_CALL_TIMEOUT=21s") {
		t.Errorf("the service with %s: exit %d, output %q; want 1 naming PAYMENTS_CALL_TIMEOUT", bad, code, out)
	}
}

// runClean runs bin with args and this process's environment less every
// outbound variable (OUTBOUND_*, INVENTORY_*, PAYMENTS_*), plus env, and
// returns its combined output and exit code. It gives the program a
// minute.
func runClean(t *testing.T, bin string, args []string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOUND_") && !strings.HasPrefix(kv, "INVENTORY_") && !strings.HasPrefix(kv, "PAYMENTS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", bin, err)
	}
	return string(out), 0
}

// firstPartMax is the most lines README.md may have before "# Reference":
// what a newcomer reads first.
const firstPartMax = 250

// TestREADMEFirstPartIsShort checks that the README's part before the
// reference fits in firstPartMax lines.
func TestREADMEFirstPartIsShort(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(strings.Split(string(readme), "\n"), "# Reference")
	switch {
	case i < 0:
		t.Fatal(`README.md has no "# Reference" line`)
	case i > firstPartMax:
		t.Errorf("README.md has %d lines before # Reference, want at most %d: move reference material below it", i, firstPartMax)
	}
}

// trackerRef is a reference to the project's issue tracker or its tasks:
// the README and the guides describe behaviour, not its history.
var trackerRef = regexp.MustCompile(`[Ii]ssue ?#?[0-9]+|task [0-9]`)

// TestDocsCiteNoIssueNumbers checks that README.md and docs/*.md name no
// issue or task numbers.
func TestDocsCiteNoIssueNumbers(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(files, readmePath) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			if m := trackerRef.FindString(l); m != "" {
				t.Errorf("%s:%d: %q: say what the behaviour is, not which issue asked for it", name, i+1, m)
			}
		}
	}
}
