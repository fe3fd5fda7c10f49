package translate

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// maxSchemaDepth bounds the nesting of a schema the translation walks.
const maxSchemaDepth = 128

// jsonSchema rewrites a Gemini schema into JSON Schema: Gemini's OpenAPI
// subset names types in upper case ("OBJECT") and marks optional values
// with nullable, and Gemini CLI sends upper-case names even in
// responseJsonSchema. Type names are lower-cased, nullable folds into the
// type ("string" becomes ["string","null"]) and propertyOrdering (a
// Gemini-only hint) goes; everything else, key order included, is kept.
func jsonSchema(raw json.RawMessage, field string) (json.RawMessage, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fieldErr(field, "must be a JSON schema object")
	}
	r := gjson.ParseBytes(raw)
	if !r.IsObject() {
		return nil, fieldErr(field, "must be a JSON schema object")
	}
	var buf bytes.Buffer
	if !schemaNode(r, &buf, 0) {
		return nil, fieldErr(field, "nested deeper than %d levels", maxSchemaDepth)
	}
	return buf.Bytes(), nil
}

// schemaNode writes one schema; false when nested too deep.
func schemaNode(r gjson.Result, buf *bytes.Buffer, depth int) bool {
	if !r.IsObject() {
		buf.WriteString(r.Raw)
		return true
	}
	if depth > maxSchemaDepth {
		return false
	}
	nullable := r.Get("nullable").Type == gjson.True
	ok := true
	first := true
	buf.WriteByte('{')
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "nullable", "propertyOrdering":
			return true // folded into type; a Gemini-only hint
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteString(k.Raw)
		buf.WriteByte(':')
		switch k.Str {
		case "type":
			schemaType(v, nullable, buf)
		case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
			ok = schemaMap(v, buf, depth+1)
		case "anyOf", "oneOf", "allOf", "prefixItems":
			ok = schemaList(v, buf, depth+1)
		case "items":
			if v.IsArray() {
				ok = schemaList(v, buf, depth+1)
			} else {
				ok = schemaNode(v, buf, depth+1)
			}
		case "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
			"propertyNames", "unevaluatedProperties", "unevaluatedItems":
			ok = schemaNode(v, buf, depth+1)
		default:
			buf.WriteString(v.Raw)
		}
		return ok
	})
	buf.WriteByte('}')
	return ok
}

func schemaMap(r gjson.Result, buf *bytes.Buffer, depth int) bool {
	if !r.IsObject() {
		buf.WriteString(r.Raw)
		return true
	}
	ok, first := true, true
	buf.WriteByte('{')
	r.ForEach(func(k, v gjson.Result) bool {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteString(k.Raw)
		buf.WriteByte(':')
		ok = schemaNode(v, buf, depth)
		return ok
	})
	buf.WriteByte('}')
	return ok
}

func schemaList(r gjson.Result, buf *bytes.Buffer, depth int) bool {
	if !r.IsArray() {
		buf.WriteString(r.Raw)
		return true
	}
	ok, first := true, true
	buf.WriteByte('[')
	r.ForEach(func(_, v gjson.Result) bool {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		ok = schemaNode(v, buf, depth)
		return ok
	})
	buf.WriteByte(']')
	return ok
}

// schemaType writes a type lower-cased, with "null" added for nullable.
func schemaType(v gjson.Result, nullable bool, buf *bytes.Buffer) {
	var names []string
	switch {
	case v.Type == gjson.String:
		names = []string{strings.ToLower(v.Str)}
	case v.IsArray():
		v.ForEach(func(_, t gjson.Result) bool {
			names = append(names, strings.ToLower(t.String()))
			return true
		})
	default:
		buf.WriteString(v.Raw)
		return
	}
	hasNull := false
	for _, n := range names {
		hasNull = hasNull || n == "null"
	}
	if nullable && !hasNull {
		names = append(names, "null")
	}
	if len(names) == 1 && v.Type == gjson.String {
		buf.Write(marshal(names[0]))
		return
	}
	buf.Write(marshal(names))
}
