// Package cloudtest holds local stand-ins for the clouds' credential
// services, for tests: a Google OAuth token endpoint that checks the
// signed JWT of a service account it generated, an AWS STS that checks
// the SigV4 signature of AssumeRole, and a SigV4 check for fake Bedrock
// endpoints. Nothing here calls a real cloud.
package cloudtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Google is a token endpoint for one service account whose key it made.
type Google struct {
	*httptest.Server
	Email string
	key   *rsa.PrivateKey
	// ExpiresIn is the lifetime stated for each token (seconds).
	ExpiresIn atomic.Int64
	// Hang makes the endpoint answer nothing until the client gives up.
	Hang atomic.Bool

	release chan struct{} // ends hanging answers when the test ends

	mu     sync.Mutex
	issued map[string]bool
	n      int
}

// NewGoogle starts a token endpoint; it stops with the test.
func NewGoogle(t testing.TB) *Google {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024) // small: test speed
	if err != nil {
		t.Fatal(err)
	}
	g := &Google{Email: "gateway@test-project.iam.gserviceaccount.com", key: key, issued: map[string]bool{},
		release: make(chan struct{})}
	g.ExpiresIn.Store(3600)
	g.Server = httptest.NewServer(http.HandlerFunc(g.token))
	t.Cleanup(g.Close)
	t.Cleanup(func() { close(g.release) }) // first: Close waits for handlers
	return g
}

// ServiceAccountFile writes the service account's JSON key, its
// token_uri pointing here, into dir and returns its path.
func (g *Google) ServiceAccountFile(t testing.TB, dir string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(g.key)
	if err != nil {
		t.Fatal(err)
	}
	sa := map[string]string{
		"type": "service_account", "project_id": "test-project", "private_key_id": "key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": g.Email, "client_id": "1", "token_uri": g.URL + "/token",
	}
	b, _ := json.Marshal(sa)
	p := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// token serves the JWT bearer grant: the assertion must be signed by the
// service account's key, be addressed to this endpoint and not expired.
func (g *Google) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if g.Hang.Load() {
		select {
		case <-r.Context().Done():
		case <-g.release:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := g.checkAssertion(r.PostForm.Get("grant_type"), r.PostForm.Get("assertion")); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, err.Error())
		return
	}
	g.mu.Lock()
	g.n++
	tok := fmt.Sprintf("ya29.test-%d", g.n)
	g.issued[tok] = true
	g.mu.Unlock()
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":%d,"token_type":"Bearer"}`, tok, g.ExpiresIn.Load())
}

func (g *Google) checkAssertion(grant, jwt string) error {
	if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		return fmt.Errorf("grant_type %q", grant)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("bad signature encoding")
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, h[:], sig); err != nil {
		return fmt.Errorf("Invalid JWT Signature.")
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Exp   int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return fmt.Errorf("bad claims")
	}
	switch {
	case c.Iss != g.Email:
		return fmt.Errorf("iss %q", c.Iss)
	case c.Aud != g.URL+"/token":
		return fmt.Errorf("aud %q", c.Aud)
	case c.Scope != "https://www.googleapis.com/auth/cloud-platform":
		return fmt.Errorf("scope %q", c.Scope)
	case time.Unix(c.Exp, 0).Before(time.Now()):
		return fmt.Errorf("Invalid JWT: Token must be a short-lived token")
	}
	return nil
}

// Valid reports whether an Authorization header carries a token this
// endpoint issued and has not revoked.
func (g *Google) Valid(authorization string) bool {
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	g.mu.Lock()
	defer g.mu.Unlock()
	return ok && g.issued[tok]
}

// Revoke makes every token issued so far invalid.
func (g *Google) Revoke() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issued = map[string]bool{}
}

// Issued is the number of tokens issued so far.
func (g *Google) Issued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h[:])
}
