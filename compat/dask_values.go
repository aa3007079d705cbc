package compat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// interpretValue is dask.config.interpret_value for DASK_* variables: a
// Python literal (ast.literal_eval) if the text is one, else none/null/
// true/false in any case, else the text itself. Containers ([...], (...),
// {...}) are read with YAML flow syntax, which agrees with Python literals
// for the plain strings, numbers and nesting that configs use.
func interpretValue(s string) any {
	t := strings.TrimLeft(s, " \t")
	switch t {
	case "True":
		return true
	case "False":
		return false
	case "None":
		return nil
	}
	if n, ok := pythonInt(t); ok {
		return n
	}
	if f, ok := pythonFloat(t); ok {
		return f
	}
	if q, ok := pythonString(t); ok {
		return q
	}
	if len(t) > 1 && strings.ContainsAny(t[:1], "[({") {
		flow := t
		if t[0] == '(' && t[len(t)-1] == ')' {
			flow = "[" + t[1:len(t)-1] + "]"
		}
		var v any
		if err := yaml.Unmarshal([]byte(flow), &v); err == nil {
			return normalizeYAML(v)
		}
	}
	switch strings.ToLower(s) {
	case "none", "null":
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	return s
}

func pythonInt(s string) (int64, bool) {
	body := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if body == "" || !unicode.IsDigit(rune(body[0])) || strings.HasSuffix(body, "_") {
		return 0, false
	}
	// Python forbids leading zeros in decimal ints ("007" is a SyntaxError).
	if len(body) > 1 && body[0] == '0' && unicode.IsDigit(rune(body[1])) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 0, 64)
	return n, err == nil
}

func pythonFloat(s string) (float64, bool) {
	body := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if body == "" || !(unicode.IsDigit(rune(body[0])) || body[0] == '.') {
		return 0, false // rejects inf, nan, Infinity: not Python literals
	}
	// Without '.' or an exponent it is an int form, handled (or rejected,
	// like "007") by pythonInt.
	if strings.ContainsAny(body, "xXpP") || !strings.ContainsAny(body, ".eE") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

func pythonString(s string) (string, bool) {
	if len(s) < 2 || (s[0] != '"' && s[0] != '\'') || s[len(s)-1] != s[0] {
		return "", false
	}
	if s[0] == '\'' {
		inner := strings.ReplaceAll(s[1:len(s)-1], `\'`, `'`)
		s = `"` + strings.ReplaceAll(inner, `"`, `\"`) + `"`
	}
	q, err := strconv.Unquote(s)
	return q, err == nil
}

// timedeltaUnits is dask.utils.timedelta_sizes (seconds per unit); lookups
// try the unit as written and lower-cased, like dask's table, which holds
// both spellings.
var timedeltaUnits = map[string]float64{
	"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400,
	"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400,
	"millisecond": 1e-3, "microsecond": 1e-6, "nanosecond": 1e-9,
	"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400,
	"milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9,
}

// ParseTimedelta is dask.utils.parse_timedelta with default unit seconds:
// numbers are seconds, strings are "<number><unit>" with optional spaces
// ("5 minutes", "500ms", "1us", "h" = one hour). Config files and clients'
// ops (fifo_timeout, timeouts, get_events' since) spell durations this way.
func ParseTimedelta(v any) (time.Duration, error) {
	var s string
	switch x := v.(type) {
	case time.Duration: // a default set from DefaultSettings
		return x, nil
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		s = x
	default:
		return 0, fmt.Errorf("%s is not a duration", pyRepr(v))
	}
	s = strings.ReplaceAll(s, " ", "")
	if s == "" {
		return 0, fmt.Errorf("%s is not a duration", pyRepr(v))
	}
	if !unicode.IsDigit(rune(s[0])) {
		s = "1" + s
	}
	i := len(s)
	for i > 0 && unicode.IsLetter(rune(s[i-1])) {
		i--
	}
	unit := s[i:]
	if unit == "" {
		unit = "s"
	}
	mult, ok := timedeltaUnits[unit]
	if !ok {
		mult, ok = timedeltaUnits[strings.ToLower(unit)]
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if !ok || err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%s is not a duration", pyRepr(v))
	}
	secs := n * mult
	if math.Abs(secs) > float64(math.MaxInt64)/1e9 {
		return 0, fmt.Errorf("%s is too long a duration", pyRepr(v))
	}
	return time.Duration(math.Round(secs * 1e9)), nil
}

// byteUnits is dask.utils.byte_sizes, lower-cased (dask matches units
// case-insensitively): decimal kB..PB, binary KiB..PiB, their one-letter
// and "ki"-style short forms.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, "pi": 1 << 50,
}

// parseBytes is dask.utils.parse_bytes: numbers as is, strings like
// "100 MB", "1kiB", "64MiB", "MB" (= 1 MB).
func parseBytes(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	case string:
		s := strings.ReplaceAll(x, " ", "")
		if !strings.ContainsAny(s, "0123456789") {
			s = "1" + s
		}
		i := len(s)
		for i > 0 && unicode.IsLetter(rune(s[i-1])) {
			i--
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		mult, ok := byteUnits[strings.ToLower(s[i:])]
		if err != nil || !ok || math.IsNaN(n) || math.IsInf(n, 0) || math.Abs(n*mult) > math.MaxInt64 {
			return 0, fmt.Errorf("%s is not a byte size", pyRepr(v))
		}
		return int64(n * mult), nil
	default:
		return 0, fmt.Errorf("%s is not a byte size", pyRepr(v))
	}
}

// pyRepr renders a config value for error messages the way a dask user
// wrote it: strings quoted, null as null.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	default:
		return fmt.Sprint(x)
	}
}
