package jsoncheck

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeError(t *testing.T) {
	type item struct {
		Role string `json:"role"`
	}
	type request struct {
		Messages []item           `json:"messages"`
		Max      int64            `json:"max_tokens"`
		Count    uint32           `json:"count"`
		Temp     *float64         `json:"temperature"`
		Stream   bool             `json:"stream"`
		Meta     map[string]any   `json:"metadata"`
		Tool     *struct{ A int } `json:"tool"`
		Raw      []byte           `json:"raw"`
	}
	for _, tc := range []struct {
		name, body, field, msg string
	}{
		{"array wanted", `{"messages":5}`, "messages", "expected an array, got a number"},
		{"nested string wanted", `{"messages":[{"role":7}]}`, "messages.role", "expected a string, got a number"},
		{"integer wanted", `{"max_tokens":1.5}`, "max_tokens", "expected an integer, got a number (1.5)"},
		{"unsigned wanted", `{"count":-1}`, "count", "expected a non-negative integer, got a number (-1)"},
		{"number behind a pointer", `{"temperature":"hot"}`, "temperature", "expected a number, got a string"},
		{"boolean wanted", `{"stream":"yes"}`, "stream", "expected a boolean, got a string"},
		{"object wanted", `{"metadata":[1]}`, "metadata", "expected an object, got an array"},
		{"struct wanted", `{"tool":true}`, "tool", "expected an object, got a boolean"},
		{"bytes are base64", `{"raw":1}`, "raw", "expected a base64 string, got a number"},
		{"body not an object", `[1]`, "", "expected an object, got an array"},
		{"syntax", `{"messages":`, "", "not valid JSON: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r request
			field, msg, ok := DecodeError(json.Unmarshal([]byte(tc.body), &r))
			if !ok || field != tc.field || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("got (%q, %q, %v), want (%q, %q...)", field, msg, ok, tc.field, tc.msg)
			}
			if strings.Contains(msg, "Go ") || strings.Contains(msg, "jsoncheck.") {
				t.Fatalf("message names Go types: %s", msg)
			}
		})
	}
	if _, _, ok := DecodeError(errors.New("other")); ok {
		t.Fatal("an unrelated error was described as a decode error")
	}
}
