package wardencli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// usageErr is a bad command line: exit status 2, one line naming the flag
// and quoting the value.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageErr{fmt.Sprintf(format, args...)} }

// flagSpec describes one flag of a subcommand.
type flagSpec struct {
	name    string
	boolean bool
}

// parsed holds the values of a subcommand's flags and its COMMAND after --.
type parsed struct {
	values  map[string]string
	present map[string]bool
	rest    []string
	dashes  bool
}

// parseFlags parses "--name value", "--name=value" and boolean "--name" up
// to "--". Unknown flags, repeated flags, stray arguments and missing
// values are usage errors.
func parseFlags(args []string, specs []flagSpec, wantCommand bool) (*parsed, error) {
	known := map[string]flagSpec{}
	for _, s := range specs {
		known[s.name] = s
	}
	p := &parsed{values: map[string]string{}, present: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.dashes = true
			p.rest = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "--") {
			if wantCommand {
				return nil, usagef("%q: put COMMAND after --", a)
			}
			return nil, usagef("unexpected argument %q", a)
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		spec, ok := known[name]
		if !ok {
			return nil, usagef("unknown flag --%s", name)
		}
		if p.present[name] {
			return nil, usagef("--%s given twice", name)
		}
		p.present[name] = true
		if spec.boolean {
			if hasValue {
				return nil, usagef("--%s takes no value, got %q", name, value)
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, usagef("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		p.values[name] = value
	}
	if wantCommand && len(p.rest) == 0 {
		return nil, usagef("missing COMMAND after --")
	}
	if !wantCommand && p.dashes {
		return nil, usagef("this command takes no COMMAND")
	}
	return p, nil
}

var secondsRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// MaxSeconds is the largest number of seconds any flag accepts (one year).
const MaxSeconds = 31536000

// ParseSeconds validates a decimal number of seconds for flag: digits with
// an optional fraction, nothing else (no sign, hex, exponent, inf or nan),
// at most MaxSeconds, and > 0 unless zeroOK.
func ParseSeconds(flag, value string, zeroOK bool) (time.Duration, error) {
	if !secondsRE.MatchString(value) {
		return 0, usagef("--%s: invalid seconds %q (want a decimal number such as 30 or 2.5)", flag, value)
	}
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || f > MaxSeconds {
		return 0, usagef("--%s: %q is more than %d seconds", flag, value, MaxSeconds)
	}
	if f == 0 && !zeroOK {
		return 0, usagef("--%s: %q must be greater than 0", flag, value)
	}
	d := time.Duration(f * float64(time.Second))
	if f > 0 && d == 0 {
		d = 1 // sub-nanosecond: still > 0, still expires before launch
	}
	return d, nil
}
