//go:build sdk

package server

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestAnthropicSDKModels: the Anthropic SDK lists and reads the gateway's
// models in its own shape.
func TestAnthropicSDKModels(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	c := anthropic.NewClient(option.WithBaseURL(g.URL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "m" {
		t.Fatalf("models = %+v", page.Data)
	}
	if _, err := c.Models.Get(context.Background(), "m", anthropic.ModelGetParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Models.Get(context.Background(), "nope", anthropic.ModelGetParams{})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("err = %v", err)
	}
}
