//go:build sdk

package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
)

// TestSDKsWithIssuedKey: a key issued through the admin API works in the
// official OpenAI and Anthropic SDKs, unmodified; its model list shows its
// own models only, another model raises the SDKs' not-found error, and once
// it expires (or is revoked) their authentication error.
func TestSDKsWithIssuedKey(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, adminYAML, clk)
	a := g.adminCall("POST", "/admin/v1/keys", `{"name":"sdk","tenant":"acme","models":["m"],"expires_at":"`+
		clk.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	if a.Status != 201 {
		t.Fatal(a.Body)
	}
	secret := gjson.Get(a.Body, "secret").String()
	oc := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey(secret), aoption.WithMaxRetries(0))
	ctx := context.Background()
	chat := func(model string) error {
		_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	message := func(model string) error {
		_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		return err
	}
	if err := chat("m"); err != nil {
		t.Fatalf("openai: %v", err)
	}
	if err := message("m"); err != nil {
		t.Fatalf("anthropic: %v", err)
	}
	page, err := oc.Models.List(ctx)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "m" {
		t.Fatalf("models: %+v %v", page, err)
	}
	var oe *openai.Error
	if err := chat("m2"); !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Code != "model_not_found" {
		t.Errorf("openai, a model the key may not use: %v", err)
	}
	var ae *anthropic.Error
	if err := message("m2"); !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Errorf("anthropic, a model the key may not use: %v", err)
	}
	clk.Advance(time.Hour)
	if err := chat("m"); !errors.As(err, &oe) || oe.StatusCode != http.StatusUnauthorized || oe.Code != "key_expired" {
		t.Errorf("openai, expired: %v", err)
	}
	if err := message("m"); !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Errorf("anthropic, expired: %v", err)
	}
}
