//go:build clients

package clients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"
)

// genaiSDK is Google's Gen AI Go SDK on the Gemini API
// (/v1beta/models/{m}:generateContent, :streamGenerateContent?alt=sse).
type genaiSDK struct{ c *genai.Client }

func newGenAI(base, key string) (sdkClient, error) {
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base + "/", APIVersion: "v1beta"}})
	if err != nil {
		return nil, err
	}
	return &genaiSDK{c}, nil
}

// apiError: genai parses Google's error shape ({"error": {"code": 404,
// "message", "status": "NOT_FOUND"}}) into APIError; for any other body
// it keeps the HTTP status line ("404 Not Found") as Status and the raw
// body as Message.
func (g *genaiSDK) apiError(err error) (apiErr, bool) {
	var e genai.APIError
	if !errors.As(err, &e) {
		var p *genai.APIError
		if !errors.As(err, &p) {
			return apiErr{}, false
		}
		e = *p
	}
	native := e.Status != "" && !strings.Contains(e.Status, " ") && strings.ToUpper(e.Status) == e.Status
	return apiErr{status: e.Code, native: native && e.Message != "", msg: e.Message}, true
}

// generate sends one request, unary or streamed; a stream's chunks are
// merged into one model content (its parts in order).
func (g *genaiSDK) generate(ctx context.Context, model string, contents []*genai.Content, cfg *genai.GenerateContentConfig, stream bool) (*genai.Content, error) {
	if !stream {
		r, err := g.c.Models.GenerateContent(ctx, model, contents, cfg)
		if err != nil {
			return nil, err
		}
		if len(r.Candidates) == 0 || r.Candidates[0].Content == nil {
			return nil, fmt.Errorf("no candidate")
		}
		return r.Candidates[0].Content, nil
	}
	merged := &genai.Content{Role: genai.RoleModel}
	finished := false
	for r, err := range g.c.Models.GenerateContentStream(ctx, model, contents, cfg) {
		if err != nil {
			return nil, err
		}
		for _, c := range r.Candidates {
			if c.Content != nil {
				merged.Parts = append(merged.Parts, c.Content.Parts...)
			}
			if c.FinishReason != "" {
				finished = true
			}
		}
	}
	if !finished {
		return nil, fmt.Errorf("the stream ended without a finishReason")
	}
	return merged, nil
}

func contentText(c *genai.Content) string {
	var b strings.Builder
	for _, p := range c.Parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func (g *genaiSDK) text(ctx context.Context, model, prompt string, stream bool) (string, error) {
	c, err := g.generate(ctx, model, genai.Text(prompt), nil, stream)
	if err != nil {
		return "", err
	}
	return contentText(c), nil
}

func (g *genaiSDK) toolLoop(ctx context.Context, model string, stream bool, result string) (toolCall, string, error) {
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: sdkTool, Description: "Returns the marker.",
		Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"key": {Type: genai.TypeString}}},
	}}}}}
	contents := genai.Text("Get the marker.")
	c, err := g.generate(ctx, model, contents, cfg, stream)
	if err != nil {
		return toolCall{}, "", err
	}
	var fc *genai.FunctionCall
	for _, p := range c.Parts {
		if p.FunctionCall != nil {
			fc = p.FunctionCall
			break
		}
	}
	if fc == nil {
		return toolCall{}, "", fmt.Errorf("no functionCall part; the answer was %q", contentText(c))
	}
	args, _ := json.Marshal(fc.Args)
	call := toolCall{fc.Name, string(args)}
	// The model's content goes back as it came, thought signatures included.
	c.Role = genai.RoleModel
	contents = append(contents, c, genai.NewContentFromFunctionResponse(fc.Name, map[string]any{"output": result}, genai.RoleUser))
	c, err = g.generate(ctx, model, contents, cfg, stream)
	if err != nil {
		return call, "", err
	}
	return call, contentText(c), nil
}

// genaiExtra: :countTokens, per provider type.
var genaiExtra = map[string]func(context.Context, sdkClient) error{
	"count-tokens": func(ctx context.Context, c sdkClient) error {
		r, err := c.(*genaiSDK).c.Models.CountTokens(ctx, sdkModel, genai.Text("How many tokens is this?"), nil)
		if err != nil {
			return err
		}
		if r.TotalTokens <= 0 {
			return fmt.Errorf("totalTokens %d", r.TotalTokens)
		}
		return nil
	},
}

// genaiGateway: GET /v1beta/models as the SDK reads it.
var genaiGateway = map[string]func(context.Context, sdkClient) error{
	"models": func(ctx context.Context, c sdkClient) error {
		page, err := c.(*genaiSDK).c.Models.List(ctx, nil)
		if err != nil {
			return err
		}
		var ids []string
		for _, m := range page.Items {
			ids = append(ids, m.Name)
		}
		return listed(ids)
	},
}
