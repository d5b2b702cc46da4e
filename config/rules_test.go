package config

import (
	"strings"
	"testing"
)

// TestRuleTagsKnown: every tag of every Client field has its words in
// ruleTags (a reference text, and a message or a blame), every cross-field
// tag names fields that exist, and every file tag is described.
func TestRuleTagsKnown(t *testing.T) {
	for i := range fields().all {
		f := &fields().all[i]
		for _, r := range f.rules {
			rt, ok := ruleTags[r.tag]
			switch {
			case !ok:
				t.Errorf("%s: tag %q has no entry in ruleTags", f.goName, r.tag)
				continue
			case rt.doc == nil:
				t.Errorf("%s: tag %q has no reference text", f.goName, r.tag)
			case r.tag != "omitempty" && rt.fail == nil && rt.blame == nil:
				t.Errorf("%s: tag %q has no message", f.goName, r.tag)
			}
			if rt.others != nil {
				for _, o := range rt.others(r.param) {
					if _, ok := fields().byGoName[o]; !ok {
						t.Errorf("%s: tag %s=%s compares with %q, no field", f.goName, r.tag, r.param, o)
					}
				}
			}
		}
		if f.file != "" && fileDoc[f.file] == "" {
			t.Errorf("%s: file kind %q is not described", f.goName, f.file)
		}
		if f.why.tag != "" && f.param(f.why.tag) == "" && !hasTag(f, f.why.tag) {
			t.Errorf("%s: why names tag %q, which the field does not have", f.goName, f.why.tag)
		}
		if doc := ruleDoc(f); doc == "" || strings.Contains(doc, ", ,") {
			t.Errorf("%s: reference text %q", f.goName, doc)
		}
	}
}

func hasTag(f *field, tag string) bool {
	for _, r := range f.rules {
		if r.tag == tag {
			return true
		}
	}
	return false
}
