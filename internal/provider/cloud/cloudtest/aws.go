package cloudtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWSEnv makes the AWS SDK's default chain find exactly creds in the
// environment: no shared files, no instance metadata (never a real
// endpoint), no Bedrock API key.
func AWSEnv(t testing.TB, creds aws.Credentials) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey,
		"AWS_SESSION_TOKEN": creds.SessionToken, "AWS_CONFIG_FILE": dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", "AWS_BEARER_TOKEN_BEDROCK": "", "AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_ENDPOINT_URL": "",
		"AWS_ENDPOINT_URL_STS": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_CA_BUNDLE": "",
	} {
		t.Setenv(k, v)
	}
}

// CheckSigV4 recomputes the SigV4 signature of r (whose body was body)
// from creds, over the headers r says it signed, and compares it: the
// access key, the scope, the session token and the signature must match,
// and the signing time be within 5 minutes.
func CheckSigV4(r *http.Request, body []byte, creds aws.Credentials, region, service string) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("not a SigV4 Authorization: %q", auth)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	if d := time.Since(when); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("signed at %v", when)
	}
	scope := fmt.Sprintf("%s/%s/%s/%s/aws4_request", creds.AccessKeyID, when.Format("20060102"), region, service)
	if fields["Credential"] != scope {
		return fmt.Errorf("credential %q, want %q", fields["Credential"], scope)
	}
	if creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return fmt.Errorf("session token %q not carried", r.Header.Get("X-Amz-Security-Token"))
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	re, _ := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	re.URL.RawPath = r.URL.RawPath
	re.Host = r.Host
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" {
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256hex(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, sum, service, region, when); err != nil {
		return err
	}
	want := re.Header.Get("Authorization")
	if want != auth {
		return fmt.Errorf("signature mismatch:\n got %s\nwant %s", auth, want)
	}
	return nil
}

// STS is an AWS STS endpoint answering AssumeRole for one role (with an
// external id when set), to callers whose signature from Base checks;
// each call issues new temporary credentials.
type STS struct {
	*httptest.Server
	Base       aws.Credentials
	Role       string
	ExternalID string
	// Hang makes it answer nothing until the caller gives up.
	Hang atomic.Bool

	mu     sync.Mutex
	issued []aws.Credentials
}

// NewSTS starts an STS endpoint; it stops with the test.
func NewSTS(t testing.TB, base aws.Credentials, role, externalID string) *STS {
	s := &STS{Base: base, Role: role, ExternalID: externalID}
	release := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if s.Hang.Load() {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		s.serve(w, r, body)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(release) })
	return s
}

func (s *STS) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>r-1</RequestId></ErrorResponse>`, code, msg)
	}
	region := "us-east-1"
	if parts := strings.Split(r.Header.Get("Authorization"), "/"); len(parts) > 2 {
		region = parts[2]
	}
	if err := CheckSigV4(r, body, s.Base, region, "sts"); err != nil {
		fail(http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
		return
	}
	form, _ := parseQuery(string(body))
	switch {
	case form["Action"] != "AssumeRole":
		fail(http.StatusBadRequest, "InvalidAction", "unknown action")
	case form["RoleArn"] != s.Role || form["ExternalId"] != s.ExternalID:
		fail(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: arn:aws:iam::123456789012:user/gw is not authorized to perform: sts:AssumeRole on resource: %s", form["RoleArn"]))
	default:
		s.mu.Lock()
		n := len(s.issued) + 1
		c := aws.Credentials{AccessKeyID: fmt.Sprintf("ASIAROLE%08d", n), SecretAccessKey: fmt.Sprintf("role-secret-%d", n),
			SessionToken: fmt.Sprintf("role-session-token-%d", n), CanExpire: true, Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
		s.issued = append(s.issued, c)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials>`+
			`<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration>`+
			`</Credentials><AssumedRoleUser><AssumedRoleId>AROA1:%s</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/r/%s</Arn></AssumedRoleUser>`+
			`</AssumeRoleResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></AssumeRoleResponse>`,
			c.AccessKeyID, c.SecretAccessKey, c.SessionToken, c.Expires.Format(time.RFC3339), form["RoleSessionName"], form["RoleSessionName"])
	}
}

// Issued returns the credentials issued so far.
func (s *STS) Issued() []aws.Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]aws.Credentials(nil), s.issued...)
}

func parseQuery(s string) (map[string]string, error) {
	out := map[string]string{}
	r, err := http.NewRequest(http.MethodPost, "http://x/?"+s, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range r.URL.Query() {
		out[k] = v[0]
	}
	return out, nil
}

// Frame writes one AWS event stream message: an event (":event-type"), or
// an exception when typ ends with "Exception".
func Frame(w io.Writer, typ string, payload []byte) error {
	h := eventstream.Headers{}
	if strings.HasSuffix(typ, "Exception") {
		h.Set(":message-type", eventstream.StringValue("exception"))
		h.Set(":exception-type", eventstream.StringValue(typ))
	} else {
		h.Set(":message-type", eventstream.StringValue("event"))
		h.Set(":event-type", eventstream.StringValue(typ))
	}
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return eventstream.NewEncoder().Encode(w, eventstream.Message{Headers: h, Payload: payload})
}

// Chunk writes an InvokeModelWithResponseStream chunk carrying an
// Anthropic stream event.
func Chunk(w io.Writer, anthropicEvent string) error {
	p, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(anthropicEvent)), "p": "abcd"})
	return Frame(w, "chunk", p)
}
