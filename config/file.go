package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// FileVar names the variable that points at a file of settings read over
// the process environment, and watched for changes by the registry: a
// ConfigMap mounted as a volume carries the part an operator retunes
// live, the Deployment's env the rest.
const FileVar = "OUTBOUND_CONFIG_FILE"

// maxFileSize bounds a settings file: a file of every variable of a
// thousand systems is well under it.
const maxFileSize = 4 << 20

// File is one read of a settings file: its variables and the version of
// its content.
type File struct {
	// Path is the file's path as given.
	Path string
	// Vars are its KEY=VALUE lines.
	Vars map[string]string
	// Version is the first 12 hex digits of the SHA-256 of the content:
	// two pods running the same file show the same version.
	Version string
}

// ReadFile reads a settings file: lines of KEY=VALUE, as `outbound env
// --format dotenv` writes them, with blank lines and # comments. An
// "export " before the key is allowed; a value in double quotes is a Go
// string (escapes allowed), one in single quotes is taken as it is;
// otherwise the value is the rest of the line with its surrounding space
// trimmed. A line that is not one of these, a key that is not a variable
// name, a key given twice and a file larger than 4 MiB are problems,
// each naming its line, in one [*Error].
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{Path: path}, &Error{Problems: []Problem{{Var: FileVar, Value: path, Source: FromEnv,
			Rule: fileErrRule(err)}}}
	}
	return ParseFile(path, data)
}

// ParseFile is [ReadFile] of content already read.
func ParseFile(path string, data []byte) (File, error) {
	f := File{Path: path, Vars: map[string]string{}, Version: FileVersion(data)}
	if len(data) > maxFileSize {
		return f, &Error{Problems: []Problem{{Var: FileVar, Value: path, Source: FromEnv,
			Rule: fmt.Sprintf("is %d bytes; a settings file is at most %d", len(data), maxFileSize)}}}
	}
	var probs []Problem
	where := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFileSize)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// A problem names the line, and the variable when there is one;
		// it never shows a value, which may be a secret.
		at := fmt.Sprintf("line %d of %s: ", n, path)
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		key = strings.TrimSpace(key)
		switch {
		case !ok:
			probs = append(probs, Problem{Var: FileVar, Value: path, Source: FromEnv, Rule: at + "not KEY=VALUE"})
			continue
		case !varNameRE.MatchString(key):
			probs = append(probs, Problem{Var: FileVar, Value: path, Source: FromEnv,
				Rule: at + "the key is not a variable name (upper case letters, digits and _, not starting with a digit)"})
			continue
		}
		v, msg := unquote(strings.TrimSpace(value))
		if msg != "" {
			probs = append(probs, Problem{Var: key, Source: FromEnv, Rule: at + msg})
			continue
		}
		if first, dup := where[key]; dup {
			probs = append(probs, Problem{Var: key, Source: FromEnv,
				Rule: fmt.Sprintf("%sset again (first on line %d): set each variable once", at, first)})
			continue
		}
		where[key], f.Vars[key] = n, v
	}
	if len(probs) > 0 {
		return f, &Error{Problems: probs}
	}
	return f, nil
}

// FileVersion is the version of a settings file's content: the first 12
// hex digits of its SHA-256.
func FileVersion(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// varNameRE is the shape of a variable name in a settings file.
var varNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// unquote reads a value: "a Go string", 'taken as it is', or bare.
func unquote(v string) (string, string) {
	switch {
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", "a value in double quotes must be a Go string: " + err.Error()
		}
		return s, ""
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return v[1 : len(v)-1], ""
	case strings.HasPrefix(v, `"`) || strings.HasPrefix(v, `'`):
		return "", "a quoted value must end with its quote"
	}
	return v, ""
}

// Over returns env with f's variables laid over it: the environment a
// load reads when a settings file is in use. Neither is changed.
func (f File) Over(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(f.Vars))
	maps.Copy(out, env)
	maps.Copy(out, f.Vars)
	return out
}
