package jsoncheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DecodeError describes a failed decode of a client's JSON body in the
// client's terms: field is the JSON path of the offending value ("" for
// the body itself) and msg says what was expected, e.g. "expected an
// array, got a number". encoding/json's own messages name Go types
// ("Go struct field Request.messages of type []anthropic.Message"), which
// mean nothing to a client and leak the gateway's internals. ok is false
// when err is neither a type nor a syntax error.
func DecodeError(err error) (field, msg string, ok bool) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		got, value, _ := strings.Cut(te.Value, " ")
		msg = "expected " + jsonKind(te.Type) + ", got " + article(got)
		if value != "" {
			msg += " (" + value + ")"
		}
		return te.Field, msg, true
	case errors.As(err, &se):
		return "", fmt.Sprintf("not valid JSON: %s (at byte %d)", se.Error(), se.Offset), true
	}
	return "", "", false
}

// jsonKind is the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different type"
}

// article prefixes encoding/json's name of a JSON value with its article.
func article(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "a boolean"
	case "":
		return "a value of another type"
	}
	return "a " + v
}
