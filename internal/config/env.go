package config

import (
	"errors"
	"fmt"
	"strings"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in s. The default applies
// when VAR is unset or empty, as in the shell. "$$" and a "$" not followed by
// "{" are kept as written, so secrets containing "$" survive untouched. All
// unset variables of one value are reported together.
func expandEnv(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var (
		b       strings.Builder
		missing []string
	)
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			// Keep both so "$${X}" is not read as a reference.
			b.WriteString("$$")
			i += 2
			continue
		case '{':
		default:
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", errors.New(`unterminated "${"`) // the value itself may be a secret
		}
		ref := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("bad variable reference \"${%s}\": want ${NAME} or ${NAME:-default}", ref)
		}
		if strings.Contains(def, "${") {
			return "", fmt.Errorf("nested variable reference in \"${%s}\" is not supported", ref)
		}
		val, ok := getenv(name)
		switch {
		case ok && (val != "" || !hasDef):
		case hasDef:
			val = def
		default:
			missing = append(missing, name)
		}
		b.WriteString(val)
		i += 2 + end + 1
	}
	if len(missing) > 0 {
		return "", &unsetVars{names: missing}
	}
	return b.String(), nil
}

// unsetVars is a value referring to environment variables that are not
// set. Each is one problem at its line; Errors adds, once, how to fix them.
type unsetVars struct{ names []string }

func (u *unsetVars) Error() string {
	if len(u.names) == 1 {
		return "environment variable " + u.names[0] + " is not set"
	}
	return "environment variables " + strings.Join(u.names, ", ") + " are not set"
}

// unsetHint is the one line that explains every unset variable of a file.
func unsetHint(names []string) string {
	return fmt.Sprintf("%d environment variable(s) unset (%s): export them before starting "+
		"(e.g. export %s=...), or give a default in the config as ${%s:-default}",
		len(names), strings.Join(names, ", "), names[0], names[0])
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
