package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Microsoft Entra ID methods of an azure provider.
const (
	EntraClientSecret     = "client_secret"
	EntraWorkloadIdentity = "workload_identity"
	EntraManagedIdentity  = "managed_identity"
)

// AzureV1 is the api_version that selects Azure OpenAI's /openai/v1/ paths.
const AzureV1 = "v1"

var (
	entraMethods = []string{EntraClientSecret, EntraWorkloadIdentity, EntraManagedIdentity}
	// 2024-10-21, 2025-04-01-preview
	azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)
	// us-east-1, eu-central-2, us-gov-west-1, ap-southeast-4, cn-north-1
	awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d{1,2}$`)
	awsRole   = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	// us-central1, europe-west4, us-east5, global, us, eu
	gcpLocation = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// Project ids are 6-30 lowercase letters, digits and hyphens; older
	// ones may carry a domain prefix ("example.com:proj").
	gcpProject = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
)

// BedrockURL is the Bedrock runtime endpoint of an AWS region.
func BedrockURL(region string) string {
	host := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		host = "amazonaws.com.cn"
	}
	return "https://bedrock-runtime." + region + "." + host
}

// VertexURL is the Vertex AI endpoint of a location: global has no
// location prefix.
func VertexURL(location string) string {
	if location == "global" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + location + "-aiplatform.googleapis.com"
}

// cloudDefaults fills a bedrock or vertex provider's base_url from its
// region or location when the file gives none (only when those are
// well-formed, so that a bad region is reported as such).
func (l *loader) cloudDefaults(base string, p *Provider) {
	switch {
	case p.Type == TypeBedrock && awsRegion.MatchString(p.Region):
		setDefault(l, base+".base_url", &p.BaseURL, BedrockURL(p.Region))
	case p.Type == TypeVertex && gcpLocation.MatchString(p.Location):
		setDefault(l, base+".base_url", &p.BaseURL, VertexURL(p.Location))
	}
}

// validateCloud checks the cloud fields of provider p: each cloud's own
// required fields, with what they are and where to find them, and none of
// another cloud's.
func (l *loader) validateCloud(base string, p *Provider) {
	only := func(field, typ string, set bool) {
		if set && p.Type != typ {
			l.errAt(base+"."+field, "only for type %s (type is %q)", typ, p.Type)
		}
	}
	only("api_version", TypeAzure, p.APIVersion != "")
	only("entra", TypeAzure, p.Entra != nil)
	only("region", TypeBedrock, p.Region != "")
	only("profile", TypeBedrock, p.Profile != "")
	only("role_arn", TypeBedrock, p.RoleARN != "")
	only("external_id", TypeBedrock, p.ExternalID != "")
	only("project", TypeVertex, p.Project != "")
	only("location", TypeVertex, p.Location != "")
	only("credentials_file", TypeVertex, p.CredentialsFile != "")
	hasKey := p.APIKey != "" || len(p.APIKeys) > 0
	switch p.Type {
	case TypeAzure:
		l.validateAzure(base, p, hasKey)
	case TypeBedrock:
		switch {
		case p.Region == "":
			l.errAt(base+".region", "required for type bedrock: the AWS region whose Bedrock runtime to call, e.g. us-east-1 (the base_url default is built from it)")
		case !awsRegion.MatchString(p.Region):
			l.errAt(base+".region", "want an AWS region such as us-east-1 or eu-central-1, got %q", p.Region)
		}
		if p.RoleARN != "" && !awsRole.MatchString(p.RoleARN) {
			l.errAt(base+".role_arn", "want an IAM role ARN such as arn:aws:iam::123456789012:role/bedrock-caller, got %q", p.RoleARN)
		}
		if p.ExternalID != "" && p.RoleARN == "" {
			l.errAt(base+".external_id", "only used with role_arn (the role's trust policy asks for it)")
		}
		if hasKey && (p.RoleARN != "" || p.Profile != "") {
			l.errAt(base+".api_key", "a Bedrock API key is sent as it is; role_arn and profile are for AWS credentials: set one or the other")
		}
	case TypeVertex:
		switch {
		case p.Project == "":
			l.errAt(base+".project", "required for type vertex: the Google Cloud project id whose Vertex AI quota and billing to use, e.g. my-project-123")
		case !gcpProject.MatchString(p.Project):
			l.errAt(base+".project", "want a Google Cloud project id (6-30 lowercase letters, digits, hyphens), got %q", p.Project)
		}
		switch {
		case p.Location == "":
			l.errAt(base+".location", "required for type vertex: the region of the endpoint (e.g. us-central1, europe-west4, us-east5) or global; the base_url default is built from it")
		case !gcpLocation.MatchString(p.Location):
			l.errAt(base+".location", "want a Vertex AI location such as us-central1 or global, got %q", p.Location)
		}
		if hasKey {
			l.errAt(base+".api_key", "type vertex authenticates with credentials_file (a service-account JSON) or Application Default Credentials, not an API key")
		}
	}
}

func (l *loader) validateAzure(base string, p *Provider, hasKey bool) {
	switch {
	case p.APIVersion == "":
		l.errAt(base+".api_version", "required for type azure: the API version of the deployment paths, e.g. 2024-10-21 (or v1 for the /openai/v1/ paths); a wrong one is answered 404 DeploymentNotFound or 400")
	case p.APIVersion != AzureV1 && !azureVersion.MatchString(p.APIVersion):
		l.errAt(base+".api_version", "want v1 or a date version such as 2024-10-21 or 2025-04-01-preview, got %q", p.APIVersion)
	}
	if u, err := url.Parse(p.BaseURL); err == nil && strings.Contains(u.Path, "/openai") {
		l.errAt(base+".base_url", "is the resource endpoint (https://RESOURCE.openai.azure.com): the gateway adds /openai/deployments/... or /openai/v1/ itself")
	}
	switch {
	case hasKey && p.Entra != nil:
		l.errAt(base+".entra", "set api_key or entra, not both")
	case !hasKey && p.Entra == nil:
		l.errAt(base+".api_key", "required for type azure: the resource's key (Keys and Endpoint in the Azure portal, sent as api-key), or entra: {method: ...} for Microsoft Entra ID")
	case p.Entra != nil:
		l.validateEntra(base+".entra", p.Entra)
	}
}

func (l *loader) validateEntra(base string, e *Entra) {
	if e.Method == "" {
		l.errAt(base+".method", "required: one of %s", strings.Join(entraMethods, ", "))
		return
	}
	l.oneOf(base+".method", e.Method, entraMethods)
	if e.AuthorityHost != "" {
		if u, err := url.Parse(e.AuthorityHost); err != nil || u.Scheme != "https" || u.Host == "" {
			l.errAt(base+".authority_host", "want an https:// URL such as https://login.microsoftonline.com/, got %q", e.AuthorityHost)
		}
	}
	not := func(field string, set bool) {
		if set {
			l.errAt(base+"."+field, "not used by method %s", e.Method)
		}
	}
	switch e.Method {
	case EntraClientSecret:
		if e.TenantID == "" {
			l.errAt(base+".tenant_id", "required for method client_secret: the Directory (tenant) ID of the app registration")
		}
		if e.ClientID == "" {
			l.errAt(base+".client_id", "required for method client_secret: the Application (client) ID of the app registration")
		}
		if e.ClientSecret == "" {
			l.errAt(base+".client_secret", "required for method client_secret: a client secret of the app registration (Certificates & secrets)")
		}
		not("token_file", e.TokenFile != "")
	case EntraWorkloadIdentity:
		// tenant_id, client_id and token_file default to what the AKS
		// workload identity webhook injects.
		not("client_secret", e.ClientSecret != "")
	case EntraManagedIdentity:
		not("tenant_id", e.TenantID != "")
		not("client_secret", e.ClientSecret != "")
		not("token_file", e.TokenFile != "")
	}
}

// cloudWarnings are cloud settings that load but will fail at run time on
// this machine: the gateway still starts (and serves its other providers),
// the provider's attempts fail until the credential is fixed.
func (l *loader) cloudWarnings(c *Config) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[name]
		if p.Type != TypeVertex || p.CredentialsFile == "" {
			continue
		}
		if _, err := os.Stat(p.CredentialsFile); err != nil {
			field := "providers." + name + ".credentials_file"
			out = append(out, (&FieldError{File: l.file, Line: l.lineOf(field), Field: field,
				Msg: fmt.Sprintf("cannot be read (%v): this provider's attempts will fail until it can", err)}).Error())
		}
	}
	return out
}
