// Command modproxy publishes the modules in the given directories, at one
// version, into a directory that the go command reads as a module proxy
// (GOPROXY=file://DIR): for each module, DIR/<module path>/@v/ gets
// VERSION.info, VERSION.mod, VERSION.zip and a list file, laid out as the
// GOPROXY protocol says. The zips are written by golang.org/x/mod/zip, the
// code the go command itself uses to check them, so a file that a real
// proxy would refuse or leave out is refused or left out here too.
//
// It is the release rehearsal's publisher (see .ci/release-rehearsal and
// docs/releasing.md). As a release tags the modules together, every
// requirement of one module on another of the given modules is first set to
// VERSION in that module's go.mod (the directories are a throwaway copy,
// changed in place), and a module whose go.mod has a replace or exclude
// directive is refused: `go install module/cmd@version` rejects such a
// module, and a consumer silently ignores the directives.
//
// Usage:
//
//	modproxy -out DIR -version VERSION MODDIR...
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "proxy directory to write into")
	version := flag.String("version", "", "version at which every module is published")
	flag.Parse()
	if *out == "" || *version == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -out DIR -version VERSION MODDIR...")
		os.Exit(2)
	}
	if err := run(*out, *version, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// A mod is one module to publish: where it is and what its go.mod says.
type mod struct {
	dir  string
	path string
	file *modfile.File
}

// run reads every module first, so that all of them are checked and every
// sibling is known before one go.mod is rewritten or one zip is written.
func run(out, version string, dirs []string) error {
	mods := make([]mod, 0, len(dirs))
	paths := make(map[string]bool, len(dirs))
	var errs []error
	for _, dir := range dirs {
		m, err := readMod(dir, version)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mods = append(mods, m)
		paths[m.path] = true
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, m := range mods {
		if err := publish(out, version, m, paths); err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
	}
	return nil
}

// readMod parses dir/go.mod and refuses the directives that a published
// module must not carry.
func readMod(dir, version string) (mod, error) {
	name := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return mod{}, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return mod{}, err
	}
	if f.Module == nil {
		return mod{}, fmt.Errorf("%s: no module line", name)
	}
	path := f.Module.Mod.Path
	if err := module.Check(path, version); err != nil {
		return mod{}, err
	}
	var errs []error
	for _, r := range f.Replace {
		errs = append(errs, fmt.Errorf("%s:%d: replace %s: a published module must not carry a replace directive "+
			"(go install ...@version refuses it, a consumer ignores it); go.work ties the modules for development",
			name, r.Syntax.Start.Line, r.Old.Path))
	}
	for _, x := range f.Exclude {
		errs = append(errs, fmt.Errorf("%s:%d: exclude %s: a published module must not carry an exclude directive",
			name, x.Syntax.Start.Line, x.Mod.Path))
	}
	return mod{dir: dir, path: path, file: f}, errors.Join(errs...)
}

// publish sets m's requirements on its siblings to version, writes the
// result back to m's go.mod and then writes the module's .mod, .zip, .info
// and list entry under out.
func publish(out, version string, m mod, siblings map[string]bool) error {
	var bump []string
	for _, r := range m.file.Require {
		if siblings[r.Mod.Path] {
			bump = append(bump, r.Mod.Path)
		}
	}
	for _, path := range bump {
		if err := m.file.AddRequire(path, version); err != nil {
			return err
		}
	}
	m.file.Cleanup()
	gomod, err := m.file.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.dir, "go.mod"), gomod, 0o644); err != nil {
		return err
	}

	escPath, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, escVersion)
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return err
	}
	files, size, err := writeZip(base+".zip", module.Version{Path: m.path, Version: version}, m.dir)
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	if err := appendLine(filepath.Join(vdir, "list"), version); err != nil {
		return err
	}
	fmt.Printf("%s@%s: %d files, %d KiB zip\n", m.path, version, files, (size+1023)/1024)
	return nil
}

// writeZip writes the module zip of dir and returns how many files it holds
// and its size in bytes.
func writeZip(name string, mv module.Version, dir string) (files int, size int64, err error) {
	checked, err := zip.CheckDir(dir)
	if err != nil {
		return 0, 0, err
	}
	var buf bytes.Buffer
	if err := zip.CreateFromDir(&buf, mv, dir); err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return 0, 0, err
	}
	return len(checked.Valid), int64(buf.Len()), nil
}

// appendLine adds version to a proxy list file unless it is there already.
func appendLine(name, version string) error {
	old, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, v := range strings.Fields(string(old)) {
		if v == version {
			return nil
		}
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, version); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
