package mock

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/tidwall/gjson"

	"switchboard/internal/provider"
)

// OpenAI wire shapes. Structs (not maps) keep the field order of the real
// API, which makes captured traffic easy to compare by eye.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatMessage struct {
	Role        string  `json:"role"`
	Content     string  `json:"content"`
	Refusal     *string `json:"refusal"`
	Annotations []any   `json:"annotations"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             usage        `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when include_usage is set,
	// absent otherwise, as upstream does.
	Usage any `json:"usage,omitempty"`
}

type textChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             any          `json:"usage,omitempty"`
}

type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type respItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Role    string        `json:"role"`
	Content []respContent `json:"content"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type response struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Error             any                `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Instructions      any                `json:"instructions"`
	MaxOutputTokens   *int64             `json:"max_output_tokens"`
	Model             string             `json:"model"`
	Output            []respItem         `json:"output"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	ToolChoice        string             `json:"tool_choice"`
	Tools             []any              `json:"tools"`
	Usage             *respUsage         `json:"usage"`
	Metadata          map[string]string  `json:"metadata"`
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingList struct {
	Object string         `json:"object"`
	Data   []embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  embeddingUsage `json:"usage"`
}

// jsonMarshal is json.Marshal without HTML escaping, so "<" in a provider
// name stays readable, as in upstream answers.
func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (j *job) id() string {
	n := strconv.FormatInt(j.num, 10)
	switch j.endpoint {
	case provider.Completions:
		return "cmpl-mock-" + n
	case provider.Responses:
		return "resp_mock_" + n
	}
	return "chatcmpl-mock-" + n
}

func (j *job) itemID() string { return "msg_mock_" + strconv.FormatInt(j.num, 10) }

func (j *job) usageObj() usage {
	return usage{PromptTokens: j.prompt, CompletionTokens: j.tokens, TotalTokens: j.prompt + j.tokens}
}

func (j *job) unaryBody() ([]byte, error) {
	switch j.endpoint {
	case provider.Chat:
		return jsonMarshal(chatCompletion{
			ID: j.id(), Object: "chat.completion", Created: j.created, Model: j.model,
			Choices: []chatChoice{{
				Message:      chatMessage{Role: "assistant", Content: j.text(), Annotations: []any{}},
				FinishReason: j.finish,
			}},
			Usage: j.usageObj(), SystemFingerprint: "fp_mock",
		})
	case provider.Completions:
		return jsonMarshal(textCompletion{
			ID: j.id(), Object: "text_completion", Created: j.created, Model: j.model,
			SystemFingerprint: "fp_mock",
			Choices:           []textChoice{{Text: j.text(), FinishReason: &j.finish}},
			Usage:             j.usageObj(),
		})
	case provider.Responses:
		return jsonMarshal(j.response(true, j.text()))
	}
	return j.embeddings()
}

// response is the Responses API object; done=false is the in-progress
// snapshot sent at the start of a stream.
func (j *job) response(done bool, text string) response {
	r := response{
		ID: j.id(), Object: "response", CreatedAt: j.created, Status: "in_progress",
		Model: j.model, Output: []respItem{}, ParallelToolCalls: true,
		ToolChoice: "auto", Tools: []any{}, Metadata: map[string]string{},
	}
	if v := j.body.Get("instructions"); v.Exists() {
		r.Instructions = json.RawMessage(v.Raw)
	}
	if v := j.body.Get("max_output_tokens"); v.Exists() {
		m := v.Int()
		r.MaxOutputTokens = &m
	}
	if !done {
		return r
	}
	r.Status = j.respStatus()
	if r.Status == "incomplete" {
		r.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	r.Output = []respItem{j.item(r.Status, text)}
	u := &respUsage{InputTokens: j.prompt, OutputTokens: j.tokens, TotalTokens: j.prompt + j.tokens}
	r.Usage = u
	return r
}

// respStatus: a Responses answer cut by max_output_tokens is "incomplete",
// not "completed", as upstream reports it.
func (j *job) respStatus() string {
	if j.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

func (j *job) item(status, text string) respItem {
	it := respItem{ID: j.itemID(), Type: "message", Status: status, Role: "assistant", Content: []respContent{}}
	if status != "in_progress" {
		it.Content = []respContent{textPart(text)}
	}
	return it
}

func textPart(text string) respContent {
	return respContent{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// embeddings answers one vector per input: a string, an array of strings,
// one token array, or an array of token arrays.
func (j *job) embeddings() ([]byte, error) {
	in := j.body.Get("input")
	var items []gjson.Result
	if in.IsArray() {
		arr := in.Array()
		if len(arr) > 0 && arr[0].Type == gjson.Number {
			items = []gjson.Result{in} // one input given as token ids
		} else {
			items = arr
		}
	} else {
		items = []gjson.Result{in}
	}
	dims := 8
	if d := j.body.Get("dimensions").Int(); d > 0 && d <= 65536 {
		dims = int(d)
	}
	b64 := j.body.Get("encoding_format").String() == "base64"
	data := make([]embedding, len(items))
	for i, it := range items {
		key := it.Raw
		if it.Type == gjson.String {
			key = it.String()
		}
		v := vector(key, dims)
		data[i] = embedding{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			data[i].Embedding = encodeB64(v)
		}
	}
	return jsonMarshal(embeddingList{
		Object: "list", Data: data, Model: j.model,
		Usage: embeddingUsage{PromptTokens: j.prompt, TotalTokens: j.prompt},
	})
}

// vector is a unit vector derived only from text, so equal inputs embed
// equally across calls and processes.
func vector(text string, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	seed := h.Sum64()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	v := make([]float64, dims)
	var norm float64
	for i := range v {
		v[i] = rng.Float64()*2 - 1
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// encodeB64 is OpenAI's encoding_format=base64: little-endian float32s.
func encodeB64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
