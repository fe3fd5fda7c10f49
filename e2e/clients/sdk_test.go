//go:build clients

package clients

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"switchboard/e2e/upstream"
)

// sdkModel is the gateway model the SDK cells call; each provider type's
// gateway routes it to that type's fake.
const sdkModel = "sdk-model"

// sdkTool is the tool every SDK cell offers; the fake model calls it with
// sdkToolArgs.
const sdkTool = "get_marker"

var sdkToolArgs = map[string]any{"key": "k1"}

// toolCall is a tool call as an SDK parsed it.
type toolCall struct{ name, args string }

// sdkClient is one official SDK speaking one inbound protocol to the
// gateway at base with key.
type sdkClient interface {
	// text sends prompt and returns the answer's text.
	text(ctx context.Context, model, prompt string, stream bool) (string, error)
	// toolLoop offers sdkTool, expects a call to it, answers it with
	// result and returns the call and the final answer's text.
	toolLoop(ctx context.Context, model string, stream bool, result string) (toolCall, string, error)
	// apiError reads err as the SDK's own typed API error (ok false for
	// any other error).
	apiError(err error) (e apiErr, ok bool)
}

// apiErr is an SDK's typed API error, as the SDK parsed it.
type apiErr struct {
	status int
	// native: the SDK found its protocol's error shape in the body (an
	// OpenAI error object with a message; Anthropic's with a type and a
	// message; Google's with a status name and a message) rather than
	// only an HTTP status.
	native bool
	msg    string
}

// describe is err for a failure's reason: the API error's status and
// message when it is one.
func describe(c sdkClient, err error) error {
	if e, ok := c.apiError(err); ok {
		return fmt.Errorf("%d %s", e.status, oneLine(e.msg, 300))
	}
	return err
}

// sdkSpec names an SDK and how to make its client.
type sdkSpec struct {
	name   string
	vendor upstream.Vendor // whose API it speaks: its "direct" cells run against that fake
	make   func(base, key string) (sdkClient, error)
	// extra cells per provider type (count tokens) and at the gateway (the
	// model list), beyond the common ones.
	perProvider map[string]func(ctx context.Context, c sdkClient) error
	atGateway   map[string]func(ctx context.Context, c sdkClient) error
}

// TestSDK drives the official Go SDKs through the gateway against each
// provider type: unary and streamed text, a two-turn tool loop (unary and
// streamed), an upstream's refusal, and at the gateway an unknown model
// and a bad key, each error seen as the SDK's own typed error. The
// "direct" cells run the same against the SDK's own vendor's fake, without
// the gateway: the control that the fakes and the harness are sound.
func TestSDK(t *testing.T) {
	gateways := map[string]*gateway{}
	fakes := map[upstream.Vendor]*upstream.Server{}
	var startErr error
	for _, v := range []upstream.Vendor{upstream.Anthropic, upstream.OpenAI, upstream.Gemini} {
		up := upstream.New(v, upstream.Options{Key: upstreamKey,
			Tools: []upstream.ToolCall{{Name: sdkTool, Args: sdkToolArgs}}})
		t.Cleanup(up.Close)
		fakes[v] = up
		g, err := startGateway(t, []route{{model: sdkModel, up: up}})
		if err != nil {
			startErr = err
			break
		}
		gateways[string(v)] = g
	}
	for _, s := range sdks {
		t.Run(s.name, func(t *testing.T) {
			t.Run("direct", func(t *testing.T) {
				c, err := s.make(fakes[s.vendor].URL, upstreamKey)
				sdkCells(t, c, err, s.perProvider)
			})
			for _, p := range []string{"anthropic", "openai", "gemini"} {
				t.Run(p, func(t *testing.T) {
					g := gateways[p]
					c, err := newSDK(s, g, gatewayKey, startErr)
					sdkCells(t, c, err, s.perProvider)
				})
			}
			t.Run("gateway", func(t *testing.T) {
				g := gateways["openai"]
				c, err := newSDK(s, g, gatewayKey, startErr)
				cell(t, "unknown-model", func(t *testing.T) error {
					if err != nil {
						return err
					}
					return wantError(c, 404, "no-such-model", func(ctx context.Context) error {
						_, err := c.text(ctx, "no-such-model", "hello", false)
						return err
					})
				})
				bad, berr := newSDK(s, g, "sk-not-a-gateway-key", startErr)
				cell(t, "bad-key", func(t *testing.T) error {
					if berr != nil {
						return berr
					}
					return wantError(bad, 401, "", func(ctx context.Context) error {
						_, err := bad.text(ctx, sdkModel, "hello", false)
						return err
					})
				})
				for name, fn := range s.atGateway {
					cell(t, name, func(t *testing.T) error {
						if err != nil {
							return err
						}
						return within(func(ctx context.Context) error { return fn(ctx, c) })
					})
				}
			})
		})
	}
}

func newSDK(s sdkSpec, g *gateway, key string, startErr error) (sdkClient, error) {
	if startErr != nil {
		return nil, startErr
	}
	return s.make(g.URL, key)
}

// within runs fn with the deadline of one SDK cell.
func within(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx)
}

// sdkCells are the cells of one SDK against one provider type.
func sdkCells(t *testing.T, c sdkClient, err error, extra map[string]func(ctx context.Context, c sdkClient) error) {
	run := func(name string, fn func(ctx context.Context) error) {
		cell(t, name, func(t *testing.T) error {
			if err != nil {
				return err
			}
			return within(fn)
		})
	}
	for _, stream := range []bool{false, true} {
		suffix := ""
		if stream {
			suffix = "-stream"
		}
		run("text"+suffix, func(ctx context.Context) error {
			m := marker()
			got, err := c.text(ctx, sdkModel, "Please say "+m, stream)
			if err != nil {
				return describe(c, err)
			}
			if !strings.Contains(got, "ack "+m) {
				return fmt.Errorf("answer %q, want it to contain %q", oneLine(got, 200), "ack "+m)
			}
			return nil
		})
		run("tools"+suffix, func(ctx context.Context) error {
			m := marker()
			call, got, err := c.toolLoop(ctx, sdkModel, stream, "the marker is "+m)
			if err != nil {
				return describe(c, err)
			}
			var args map[string]any
			if call.name != sdkTool || json.Unmarshal([]byte(call.args), &args) != nil || !reflect.DeepEqual(args, sdkToolArgs) {
				return fmt.Errorf("tool call %s(%s), want %s({\"key\":\"k1\"})", call.name, call.args, sdkTool)
			}
			if !strings.Contains(got, "The tool said "+m) {
				return fmt.Errorf("after the tool result the answer is %q, want it to quote %s", oneLine(got, 200), m)
			}
			return nil
		})
	}
	// The fake refuses with 400 in its vendor's shape; the client must get
	// the same status and the upstream's message in its own protocol's
	// error shape.
	run("upstream-error", func(ctx context.Context) error {
		return wantError(c, 400, "refused by the fake upstream", func(ctx context.Context) error {
			_, err := c.text(ctx, sdkModel, "Please "+upstream.RefuseWord, false)
			return err
		})
	})
	for name, fn := range extra {
		run(name, func(ctx context.Context) error {
			if err := fn(ctx, c); err != nil {
				return describe(c, err)
			}
			return nil
		})
	}
}

// wantError checks that call fails with the SDK's typed error of status,
// parsed from its protocol's own error shape, its message containing
// text.
func wantError(c sdkClient, status int, text string, call func(ctx context.Context) error) error {
	return within(func(ctx context.Context) error {
		err := call(ctx)
		if err == nil {
			return fmt.Errorf("succeeded, want the SDK's typed error with status %d", status)
		}
		e, ok := c.apiError(err)
		switch {
		case !ok:
			return fmt.Errorf("error %T is not the SDK's typed API error: %v", err, oneLine(err.Error(), 300))
		case e.status != status:
			return fmt.Errorf("status %d, want %d: %s", e.status, status, oneLine(e.msg, 300))
		case !e.native:
			return fmt.Errorf("status %d but the body is not this protocol's error shape: %s", e.status, oneLine(e.msg, 300))
		case !strings.Contains(e.msg, text):
			return fmt.Errorf("status %d, message %q, want it to contain %q", e.status, oneLine(e.msg, 300), text)
		}
		return nil
	})
}

// listed checks that a model list (ids as the SDK gives them) names
// sdkModel.
func listed(ids []string) error {
	for _, id := range ids {
		if strings.TrimPrefix(id, "models/") == sdkModel {
			return nil
		}
	}
	return fmt.Errorf("the model list %v lacks %s", ids, sdkModel)
}
