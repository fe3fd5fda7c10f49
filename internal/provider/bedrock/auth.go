package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/cloud"
)

// SigningName is Bedrock's SigV4 service name.
const SigningName = "bedrock"

// EnvBearer is the environment variable of a Bedrock API key, read (as
// AWS's own SDKs do) when the config gives no api_key, role_arn or
// profile.
const EnvBearer = "AWS_BEARER_TOKEN_BEDROCK"

// credentialTimeout bounds one credential fetch (one STS call, one read
// of the instance metadata).
const credentialTimeout = time.Minute

// auth is how one provider's requests are authenticated: a Bedrock API key
// as a bearer token, or a SigV4 signature with credentials from the AWS
// SDK's default chain (environment, shared profile, web identity / IRSA,
// EKS pod identity, ECS, instance role), optionally through an assumed
// role, cached and refreshed by aws.CredentialsCache.
type auth struct {
	name, region string
	// envKey is EnvBearer's value when it applies.
	envKey string
	creds  *aws.CredentialsCache
	// err is why no credential chain could be set up (a profile that is
	// not in the shared files): every signed attempt fails with it.
	err    error
	signer *v4.Signer
	client *http.Client
}

func newAuth(c *config.Provider, client *http.Client) *auth {
	a := &auth{name: c.Name, region: c.Region, signer: v4.NewSigner(), client: client}
	if len(c.Keys()) > 0 {
		return a // the config's keys, rotated by the Upstream
	}
	if k := os.Getenv(EnvBearer); k != "" && c.RoleARN == "" && c.Profile == "" {
		a.envKey = k
		return a
	}
	// Credential calls (STS, SSO, the container and instance endpoints)
	// go through the SDK's own client, which honours AWS_CA_BUNDLE, with
	// an overall bound: a fetch that hangs must not hold every attempt
	// after it (they wait at most timeouts.open, see apply).
	httpc := awshttp.NewBuildableClient().WithTimeout(credentialTimeout)
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(c.Region), awsconfig.WithHTTPClient(httpc)}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	// Reads files and the environment only: credentials are fetched on
	// first use, so a gateway starts whatever their state.
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		a.err = err
		return a
	}
	if c.RoleARN == "" {
		if cc, ok := cfg.Credentials.(*aws.CredentialsCache); ok {
			a.creds = cc
		} else {
			a.creds = aws.NewCredentialsCache(cfg.Credentials)
		}
		return a
	}
	role := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = "switchboard-" + sessionName(c.Name)
		if c.ExternalID != "" {
			o.ExternalID = aws.String(c.ExternalID)
		}
	})
	a.creds = aws.NewCredentialsCache(role)
	return a
}

// sessionName keeps what a role session name allows ([\w+=,.@-], at most
// 64 characters with the prefix).
func sessionName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '@' || c == '=' || c == ',' || c == '+') {
			b[i] = '-'
		}
	}
	if len(b) > 50 {
		b = b[:50]
	}
	return string(b)
}

// apply authenticates hr, whose body is body: key (the attempt's API key,
// "" when none) as a bearer token, else a SigV4 signature.
func (a *auth) apply(ctx context.Context, hr *http.Request, body []byte, key string) *provider.Error {
	if key == "" {
		key = a.envKey
	}
	if key != "" {
		hr.Header["Authorization"] = []string{"Bearer " + key}
		return nil
	}
	if a.err != nil {
		return cloud.AuthFailed(a.name, "AWS", a.err.Error())
	}
	wctx, cancel := context.WithTimeout(ctx, cloud.OpenTimeout(a.client))
	defer cancel()
	creds, err := a.creds.Retrieve(wctx)
	if err != nil {
		return cloud.CredentialError(ctx, a.name, "AWS", 0, awsReason(err), err)
	}
	sum := sha256.Sum256(body)
	if err := a.signer.SignHTTP(ctx, creds, hr, hex.EncodeToString(sum[:]), SigningName, a.region, time.Now()); err != nil {
		return cloud.AuthFailed(a.name, "AWS", "cannot sign the request: "+err.Error())
	}
	return nil
}

// refused is told that Bedrock refused the signature (an expired session
// token, a rotated key): the cached credentials are fetched anew next.
func (a *auth) refused() {
	if a.creds != nil {
		a.creds.Invalidate()
	}
}

// awsReason is an AWS error's code and message ("AccessDenied: User ... is
// not authorized to perform: sts:AssumeRole"), "" when it has none.
func awsReason(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return ""
}
