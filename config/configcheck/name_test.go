package configcheck

import "testing"

// TestCommandName: the usage names the command as it was typed: the
// program's base name and the words before the command's arguments.
func TestCommandName(t *testing.T) {
	for _, tc := range []struct {
		argv, args []string
		want       string
	}{
		{[]string{"/bin/bookstore", "check-config", "--json"}, []string{"--json"}, "bookstore check-config"},
		{[]string{"/bin/bookstore", "check-config"}, []string{}, "bookstore check-config"},
		{[]string{"/bin/bookstore", "admin", "check-config", "-h"}, []string{"-h"}, "bookstore admin check-config"},
		{[]string{"/bin/bookstore", "check-config"}, []string{"--json"}, "bookstore"}, // args not from argv
		{nil, nil, "check-config"},
	} {
		if got := commandName(tc.argv, tc.args); got != tc.want {
			t.Errorf("commandName(%q, %q) = %q, want %q", tc.argv, tc.args, got, tc.want)
		}
	}
}
