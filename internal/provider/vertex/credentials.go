package vertex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"github.com/tidwall/gjson"

	"switchboard/internal/provider/bearer"
)

// Scope is the OAuth scope of Vertex AI.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// maxCredentialsFile bounds a credentials file as read (real ones are a
// few KB).
const maxCredentialsFile = 1 << 20

// fileTypes are the credential files accepted as credentials_file.
var fileTypes = map[string]credentials.CredType{
	"service_account":              credentials.ServiceAccount,
	"external_account":             credentials.ExternalAccount,
	"authorized_user":              credentials.AuthorizedUser,
	"impersonated_service_account": credentials.ImpersonatedServiceAccount,
}

// tokenFetch returns the token source of a provider: file (a service
// account's JSON key, or a workload identity federation config) or, when
// "", Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's file, the metadata server of GKE and Compute Engine). Each
// fetch reads the credentials afresh (a rotated key file is picked up)
// and asks Google's library for one token, so that the gateway's cache
// alone decides when a token is replaced or dropped.
func tokenFetch(file string, client *http.Client) bearer.Fetch {
	return func(ctx context.Context) (bearer.Token, error) {
		opts := &credentials.DetectOptions{Scopes: []string{Scope}, Client: client}
		var creds *auth.Credentials
		var err error
		if file == "" {
			creds, err = credentials.DetectDefault(opts)
		} else {
			creds, err = fromFile(file, opts)
		}
		if err != nil {
			return bearer.Token{}, err
		}
		tok, err := creds.Token(ctx)
		if err != nil {
			return bearer.Token{}, err
		}
		return bearer.Token{Value: tok.Value, Expiry: tok.Expiry}, nil
	}
}

func fromFile(file string, opts *credentials.DetectOptions) (*auth.Credentials, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("credentials_file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialsFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("credentials_file: %w", err)
	case len(b) > maxCredentialsFile:
		return nil, errors.New("credentials_file: larger than 1 MiB: not a credentials file")
	}
	typ := gjson.GetBytes(b, "type").String()
	ct, ok := fileTypes[typ]
	if !ok {
		return nil, fmt.Errorf("credentials_file: type %q is not a credential type Switchboard takes (service_account, external_account, authorized_user, impersonated_service_account)", typ)
	}
	return credentials.NewCredentialsFromJSON(ct, b, opts)
}

// googleFailure is the status and the reason (error_description) of a
// token request Google refused; 0 and "" when there was no answer.
func googleFailure(err error) (int, string) {
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Response == nil {
		return 0, ""
	}
	reason := gjson.GetBytes(ae.Body, "error_description").String()
	if reason == "" {
		reason = gjson.GetBytes(ae.Body, "error").String()
	}
	if reason == "" {
		reason = "the token endpoint answered " + ae.Response.Status
	}
	return ae.Response.StatusCode, reason
}
