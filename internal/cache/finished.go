package cache

import (
	"bytes"
	"io"

	"github.com/tidwall/gjson"

	"switchboard/internal/sse"
)

// Only an answer that ended naturally is stored: a finish reason of
// "stop" (or a tool call), not one cut by an output limit ("length",
// "max_tokens", an incomplete response) or a content filter, and never
// one carrying an error. A truncated answer is complete for its
// max_tokens, but a client that sees it usually asks again with more.

// natural are the finish reasons of an answer that ended by itself, per
// protocol (chat and completions share OpenAI's).
var natural = map[string]map[string]bool{
	ProtoChat:        {"stop": true, "tool_calls": true, "function_call": true},
	ProtoCompletions: {"stop": true},
	ProtoMessages:    {"end_turn": true, "stop_sequence": true, "tool_use": true},
	ProtoGemini:      {"STOP": true},
}

// finished reports why an answer must not be stored ("" when it may).
func finished(proto string, stream bool, chunks [][]byte) string {
	if !stream {
		return unaryFinished(proto, chunks[0])
	}
	return streamFinished(proto, chunks)
}

func unaryFinished(proto string, body []byte) string {
	r := gjson.ParseBytes(body)
	if !r.IsObject() || hasError(r) {
		return "error"
	}
	switch proto {
	case ProtoEmbeddings:
		if len(r.Get("data").Array()) == 0 {
			return "empty"
		}
		return ""
	case ProtoResponses:
		return statusReason(r.Get("status").Str)
	case ProtoMessages:
		return reason(proto, []string{r.Get("stop_reason").Str})
	case ProtoGemini:
		return reason(proto, strs(r.Get("candidates.#.finishReason")))
	}
	return reason(proto, strs(r.Get("choices.#.finish_reason")))
}

// hasError reports an error object (Responses answers carry "error":
// null when there is none).
func hasError(r gjson.Result) bool {
	e := r.Get("error")
	return e.Exists() && e.Type != gjson.Null
}

func statusReason(status string) string {
	if status != "completed" {
		return "truncated"
	}
	return ""
}

func strs(r gjson.Result) []string {
	var out []string
	for _, v := range r.Array() {
		out = append(out, v.Str)
	}
	return out
}

// reason checks a set of finish reasons: every one natural, at least one.
func reason(proto string, reasons []string) string {
	if len(reasons) == 0 {
		return "truncated"
	}
	for _, r := range reasons {
		if !natural[proto][r] {
			return "truncated"
		}
	}
	return ""
}

// streamFinished reads a recorded stream's events: it must end as its
// protocol's successful streams do, with natural finish reasons and no
// error event.
func streamFinished(proto string, chunks [][]byte) string {
	if proto == ProtoGemini && len(bytes.TrimSpace(chunks[0])) > 0 && bytes.TrimSpace(chunks[0])[0] == '[' {
		return arrayFinished(bytes.Join(chunks, nil))
	}
	if last := chunks[len(chunks)-1]; !bytes.HasSuffix(last, []byte("\n\n")) && !bytes.HasSuffix(last, []byte("\r\n\r\n")) {
		return "incomplete" // cut inside an event
	}
	rd := sse.NewReader(io.MultiReader(readers(chunks)...))
	var reasons []string
	done, terminal := false, false
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "incomplete"
		}
		if ev.Done() {
			done = true
			continue
		}
		if len(ev.Data) == 0 {
			continue
		}
		d := gjson.ParseBytes(ev.Data)
		if ev.Name == "error" || hasError(d) {
			return "error"
		}
		switch proto {
		case ProtoResponses:
			typ := ev.Name
			if typ == "" {
				typ = d.Get("type").Str
			}
			switch typ {
			case "response.completed":
				terminal = true
			case "response.failed", "response.incomplete", "error":
				return "truncated"
			}
		case ProtoMessages:
			switch ev.Name {
			case "message_delta":
				if r := d.Get("delta.stop_reason"); r.Type == gjson.String {
					reasons = append(reasons, r.Str)
				}
			case "message_stop":
				terminal = true
			}
		case ProtoGemini:
			for _, r := range strs(d.Get("candidates.#.finishReason")) {
				if r != "" {
					reasons = append(reasons, r)
					terminal = true
				}
			}
		default:
			for _, r := range strs(d.Get("choices.#.finish_reason")) {
				if r != "" {
					reasons = append(reasons, r)
				}
			}
		}
	}
	switch proto {
	case ProtoResponses:
		if !terminal {
			return "incomplete"
		}
		return ""
	case ProtoMessages, ProtoGemini:
		if !terminal {
			return "incomplete"
		}
	default:
		if !done {
			return "incomplete"
		}
	}
	return reason(proto, reasons)
}

// arrayFinished checks a Gemini stream in its JSON-array framing (no
// alt=sse): the whole array, no error, natural finish reasons.
func arrayFinished(b []byte) string {
	r := gjson.ParseBytes(b)
	if !gjson.ValidBytes(b) || !r.IsArray() {
		return "incomplete"
	}
	var reasons []string
	for _, it := range r.Array() {
		if hasError(it) {
			return "error"
		}
		for _, f := range strs(it.Get("candidates.#.finishReason")) {
			if f != "" {
				reasons = append(reasons, f)
			}
		}
	}
	return reason(ProtoGemini, reasons)
}

func readers(chunks [][]byte) []io.Reader {
	out := make([]io.Reader, len(chunks))
	for i, c := range chunks {
		out[i] = bytes.NewReader(c)
	}
	return out
}
