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
	switch len(missing) {
	case 0:
		return b.String(), nil
	case 1:
		return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} to give a fallback)", missing[0], missing[0])
	default:
		return "", fmt.Errorf("environment variables %s are not set", strings.Join(missing, ", "))
	}
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
