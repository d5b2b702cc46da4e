package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/outbound-go/outbound/internal/redact"
)

// field describes one setting of [Client], read from its struct tags.
type field struct {
	index  int          // index in Client
	goName string       // ConnectTimeout
	suffix string       // CONNECT_TIMEOUT
	kind   reflect.Kind // of the Go field; durations are reported as such
	typ    string       // duration, int, float, bool, string, url
	secret bool
	desc   string
	rules  []tagRule // the validate tag, in order
	why    tagRule   // why:"tag:text": text added to the message of that tag
	file   string    // file:"ca", "cert" or "key": a TLS file, checked when read
}

// tagRule is one tag=param of a validate tag.
type tagRule struct{ tag, param string }

// param returns the parameter of f's rule tag, or "".
func (f *field) param(tag string) string {
	for _, r := range f.rules {
		if r.tag == tag {
			return r.param
		}
	}
	return ""
}

// fieldSet is every setting of [Client], derived from its tags on first
// use (not at package init: a service pays for it when it loads) and
// never changed after.
type fieldSet struct {
	all      []field
	bySuffix map[string]*field // CONNECT_TIMEOUT
	byGoName map[string]*field // ConnectTimeout
}

var fields = sync.OnceValue(func() *fieldSet {
	fs := &fieldSet{all: buildFields()}
	fs.bySuffix = make(map[string]*field, len(fs.all))
	fs.byGoName = make(map[string]*field, len(fs.all))
	for i := range fs.all {
		fs.bySuffix[fs.all[i].suffix] = &fs.all[i]
		fs.byGoName[fs.all[i].goName] = &fs.all[i]
	}
	return fs
})

var durationType = reflect.TypeFor[time.Duration]()

// envNames asks envconfig for the name of the variable of every field of
// [Client] under a prefix, keyed by Go field name: its split_words
// convention (ConnectTimeout reads CONNECT_TIMEOUT), or the envconfig tag
// where the convention would split an acronym wrongly (TLSCAFile would
// read TLSCA_FILE). The names are envconfig's; the reading is this
// package's (see the package doc for why).
func envNames() map[string]string {
	const prefix = "P"
	var buf bytes.Buffer
	if err := envconfig.Usagef(prefix, &Client{}, &buf, "{{range .}}{{.Name}} {{.Key}}\n{{end}}"); err != nil {
		panic(fmt.Sprintf("config: envconfig cannot name Client's variables: %v", err))
	}
	names := map[string]string{}
	for line := range strings.Lines(buf.String()) {
		goName, key, _ := strings.Cut(strings.TrimSpace(line), " ")
		names[goName] = strings.TrimPrefix(key, prefix+"_")
	}
	return names
}

func buildFields() []field {
	t := reflect.TypeFor[Client]()
	names := envNames()
	out := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		f := field{
			index:  i,
			goName: sf.Name,
			suffix: names[sf.Name],
			kind:   sf.Type.Kind(),
			secret: sf.Tag.Get("secret") != "",
			desc:   sf.Tag.Get("desc"),
			file:   sf.Tag.Get("file"),
		}
		if v := sf.Tag.Get("validate"); v != "" {
			for part := range strings.SplitSeq(v, ",") {
				tag, param, _ := strings.Cut(part, "=")
				f.rules = append(f.rules, tagRule{tag, param})
			}
		}
		if w := sf.Tag.Get("why"); w != "" {
			tag, text, _ := strings.Cut(w, ":")
			f.why = tagRule{tag, text}
		}
		switch {
		case sf.Type == durationType:
			f.typ = "duration"
		case f.kind == reflect.Int:
			f.typ = "int"
		case f.kind == reflect.Float64:
			f.typ = "float"
		case f.kind == reflect.Bool:
			f.typ = "bool"
		case sf.Tag.Get("secret") == "url":
			f.typ = "url"
		default:
			f.typ = "string"
		}
		out = append(out, f)
	}
	return out
}

// format renders v, a value of f's type, the way the environment spells it.
func (f *field) format(v reflect.Value) string {
	switch f.typ {
	case "duration":
		return formatDuration(time.Duration(v.Int()))
	case "url":
		return redact.BaseURL(v.String())
	}
	s := formatValue(v)
	if f.secret && s != "" {
		return redacted
	}
	return s
}

// formatDuration prints a duration in Go syntax without zero tails:
// 1m rather than 1m0s, 1h rather than 1h0m0s, 0 rather than 0s.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
