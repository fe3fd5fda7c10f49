package azure

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"switchboard/internal/config"
	"switchboard/internal/provider/bearer"
)

// Scope is the Entra ID scope of Azure OpenAI (Cognitive Services).
const Scope = "https://cognitiveservices.azure.com/.default"

// entraFetch returns the token source of an Entra config: each fetch
// builds the credential afresh (cheap; the workload identity token file
// and the secret are read anew) and asks for one token, so that the
// gateway's own cache alone decides when a token is replaced or dropped.
func entraFetch(e *config.Entra, client *http.Client) bearer.Fetch {
	opts := azcore.ClientOptions{Transport: client}
	discovery := false
	if e.AuthorityHost != "" {
		opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: e.AuthorityHost, Services: map[cloud.ServiceName]cloud.ServiceConfiguration{}}
		// A named authority (a sovereign cloud, a private one) is
		// trusted as configured.
		discovery = true
	}
	newCred := func() (azcore.TokenCredential, error) {
		switch e.Method {
		case config.EntraClientSecret:
			return azidentity.NewClientSecretCredential(e.TenantID, e.ClientID, e.ClientSecret,
				&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: discovery})
		case config.EntraWorkloadIdentity:
			return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{ClientOptions: opts,
				TenantID: e.TenantID, ClientID: e.ClientID, TokenFilePath: e.TokenFile, DisableInstanceDiscovery: discovery})
		}
		mo := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts}
		if e.ClientID != "" {
			mo.ID = azidentity.ClientID(e.ClientID)
		}
		return azidentity.NewManagedIdentityCredential(mo)
	}
	return func(ctx context.Context) (bearer.Token, error) {
		cred, err := newCred()
		if err != nil {
			return bearer.Token{}, err
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Scope}})
		if err != nil {
			return bearer.Token{}, err
		}
		return bearer.Token{Value: tok.Token, Expiry: tok.ExpiresOn}, nil
	}
}

// entraFailure is the status and the reason (error_description) Entra ID
// answered a refused token request with; 0 and "" when there was no answer.
func entraFailure(err error) (int, string) {
	var af *azidentity.AuthenticationFailedError
	if !errors.As(err, &af) || af.RawResponse == nil {
		return 0, ""
	}
	reason := ""
	if b := af.RawResponse.Body; b != nil {
		// azcore keeps the (small) error body readable.
		body, _ := io.ReadAll(io.LimitReader(b, 64<<10))
		reason = gjson.GetBytes(body, "error_description").String()
		if reason == "" {
			reason = gjson.GetBytes(body, "error").String()
		}
	}
	if reason == "" {
		reason = "Entra ID answered " + af.RawResponse.Status
	}
	return af.RawResponse.StatusCode, reason
}
