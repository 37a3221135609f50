package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// FlagUsages lists fs's flags (not the hidden ones) as help shows them:
// "  -o, --output FILE   write to FILE instead of stdout". A boolean
// takes no value (and says "on by default" when it is); a value is named
// by the word in backquotes in its usage, else by its type (N, DUR) or
// the flag's own name; a default that is not zero is said, unless the
// usage says it.
func FlagUsages(fs *pflag.FlagSet) string {
	var lines, usages []string
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		left := "      --" + f.Name
		if f.Shorthand != "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		bool := f.Value.Type() == "bool"
		if !bool {
			left += " " + valueName(f, name)
		}
		switch {
		case strings.Contains(usage, "(default"):
		case bool && f.DefValue == "true":
			usage += " (on by default)"
		case !bool && f.DefValue != "" && f.DefValue != "0" && f.DefValue != "[]" && f.DefValue != "0s":
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines, usages = append(lines, left), append(usages, usage)
		width = max(width, len(left))
	})
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%-*s   %s\n", width, l, usages[i])
	}
	return b.String()
}

// valueName names a flag's value: the usage's backquoted word (given as
// name when it had one), else by its type.
func valueName(f *pflag.Flag, name string) string {
	if strings.Contains(f.Usage, "`") {
		return name
	}
	switch f.Value.Type() {
	case "int", "int64":
		return "N"
	case "duration":
		return "DUR"
	case "id":
		return strings.ToUpper(f.Name[:1]) + "ID"
	}
	return strings.ToUpper(f.Name)
}
