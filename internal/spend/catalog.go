// Package spend prices requests and keeps budgets: the embedded pricing
// catalog with config overrides, the reservation that bounds an attempt's
// cost before it is sent, the settlement rules that replace it by the real
// cost, and the unpriceable rules of strict admission under a budget.
//
// Money is an int64 of nano-USD everywhere (1 USD = 1e9); prices are int64
// nano-USD per million tokens, so that $0.01875/M is exact. No float is
// ever summed.
package spend

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"switchboard/internal/config"
)

//go:embed catalog.json
var catalogJSON []byte

// Unknown marks a rate or ceiling the catalog does not know.
const Unknown int64 = -1

// Rates are nano-USD per million tokens; Unknown where not given.
type Rates struct {
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	// InputMedia is the rate of audio or other media input where it
	// differs from Input.
	InputMedia int64
}

// Tier replaces rates when the prompt has more than Above input tokens;
// Unknown fields inherit the base rates.
type Tier struct {
	Above int64
	Rates
}

// Entry is one model's effective pricing.
type Entry struct {
	Model   string
	Family  string
	Aliases []string
	Rates
	Tiers []Tier
	// Context and MaxOutput are ceilings in tokens; Unknown when not known.
	Context   int64
	MaxOutput int64
	Source    string
	Date      string
	// Override lists the fields set by the config's pricing section.
	Override []string
}

// Family is a hosted provider family: its hosts, and the output ceiling
// assumed for a model of it the catalog does not know.
type Family struct {
	Name      string
	Hosts     []string
	MaxOutput int64
}

type fileRates struct {
	Input      *float64 `json:"input"`
	Output     *float64 `json:"output"`
	CacheRead  *float64 `json:"cache_read"`
	CacheWrite *float64 `json:"cache_write"`
	InputMedia *float64 `json:"input_media"`
}

type fileEntry struct {
	Model   string   `json:"model"`
	Family  string   `json:"family"`
	Aliases []string `json:"aliases"`
	fileRates
	Tiers []struct {
		Above int64 `json:"above"`
		fileRates
	} `json:"tiers"`
	Context   *int64 `json:"context"`
	MaxOutput *int64 `json:"max_output"`
	Source    string `json:"source"`
	Date      string `json:"date"`
}

type fileCatalog struct {
	Version  int `json:"version"`
	Families map[string]struct {
		Hosts     []string `json:"hosts"`
		MaxOutput int64    `json:"max_output"`
	} `json:"families"`
	Models []fileEntry `json:"models"`
}

// PerMillion converts USD per million tokens to nano-USD per million.
func PerMillion(usd float64) int64 { return int64(math.Round(usd * 1e9)) }

func rate(p *float64) int64 {
	if p == nil {
		return Unknown
	}
	return PerMillion(*p)
}

func (r fileRates) rates() Rates {
	return Rates{Input: rate(r.Input), Output: rate(r.Output), CacheRead: rate(r.CacheRead),
		CacheWrite: rate(r.CacheWrite), InputMedia: rate(r.InputMedia)}
}

func ceiling(p *int64) int64 {
	if p == nil {
		return Unknown
	}
	return *p
}

// Catalog is the effective price table of one config: the embedded
// catalog with the config's overrides. It is immutable.
type Catalog struct {
	entries  []*Entry          // built-in, in file order
	byName   map[string]*Entry // model and alias → built-in entry
	families []Family
	// overrides: provider → provider model name → merged entry.
	overrides map[string]map[string]*Entry
	// found remembers find's answers (a nil entry for a miss): find tries
	// several spellings and a regexp, and runs for every priced answer.
	// Bounded, since model names can come from clients.
	found  sync.Map // string → *Entry
	nfound atomic.Int32
}

// maxFound bounds the memo of find.
const maxFound = 4096

var builtin = mustParse(catalogJSON)

func mustParse(data []byte) *Catalog {
	c, err := parseCatalog(data)
	if err != nil {
		panic("spend: embedded catalog: " + err.Error())
	}
	return c
}

func parseCatalog(data []byte) (*Catalog, error) {
	var f fileCatalog
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	c := &Catalog{byName: map[string]*Entry{}, overrides: map[string]map[string]*Entry{}}
	for name, fam := range f.Families {
		c.families = append(c.families, Family{Name: name, Hosts: fam.Hosts, MaxOutput: fam.MaxOutput})
	}
	slices.SortFunc(c.families, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	for _, fe := range f.Models {
		if fe.Model == "" || fe.Source == "" || fe.Date == "" {
			return nil, fmt.Errorf("entry %q needs model, source and date", fe.Model)
		}
		e := &Entry{Model: fe.Model, Family: fe.Family, Aliases: fe.Aliases, Rates: fe.fileRates.rates(),
			Context: ceiling(fe.Context), MaxOutput: ceiling(fe.MaxOutput), Source: fe.Source, Date: fe.Date}
		for _, t := range fe.Tiers {
			e.Tiers = append(e.Tiers, Tier{Above: t.Above, Rates: t.fileRates.rates()})
		}
		for _, n := range append([]string{fe.Model}, fe.Aliases...) {
			if _, dup := c.byName[n]; dup {
				return nil, fmt.Errorf("model name %q listed twice", n)
			}
			c.byName[n] = e
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}

// Builtin returns the embedded catalog without overrides.
func Builtin() *Catalog { return builtin }

// New returns the catalog for cfg: the embedded one with cfg.Pricing
// applied field by field. cfg may be nil.
func New(cfg *config.Config) *Catalog {
	c := &Catalog{entries: builtin.entries, byName: builtin.byName, families: builtin.families,
		overrides: map[string]map[string]*Entry{}}
	if cfg == nil {
		return c
	}
	for prov, models := range cfg.Pricing {
		for model, p := range models {
			if p == nil {
				continue
			}
			base, ok := builtin.find(model)
			var e Entry
			if ok {
				e = *base
				e.Tiers = slices.Clone(base.Tiers)
			} else {
				e = Entry{Model: model, Rates: Rates{Unknown, Unknown, Unknown, Unknown, Unknown}, Context: Unknown, MaxOutput: Unknown}
			}
			e.Model, e.Aliases = model, nil
			e.Source, e.Date = "config: pricing."+prov+"."+model, ""
			applyPrice(&e, p)
			if c.overrides[prov] == nil {
				c.overrides[prov] = map[string]*Entry{}
			}
			c.overrides[prov][model] = &e
		}
	}
	return c
}

func applyPrice(e *Entry, p *config.Price) {
	set := func(name string, dst *int64, v *float64) {
		if v != nil {
			*dst = PerMillion(*v)
			e.Override = append(e.Override, name)
		}
	}
	set("input", &e.Input, p.Input)
	set("output", &e.Output, p.Output)
	set("cache_read", &e.CacheRead, p.CacheRead)
	set("cache_write", &e.CacheWrite, p.CacheWrite)
	if p.Context != nil {
		e.Context = *p.Context
		e.Override = append(e.Override, "context")
	}
	if p.MaxOutput != nil {
		e.MaxOutput = *p.MaxOutput
		e.Override = append(e.Override, "max_output")
	}
	if p.Tiers != nil {
		e.Tiers = nil
		for _, t := range p.Tiers {
			tr := Tier{Above: t.Above, Rates: Rates{Unknown, Unknown, Unknown, Unknown, Unknown}}
			for _, f := range []struct {
				dst *int64
				v   *float64
			}{{&tr.Input, t.Input}, {&tr.Output, t.Output}, {&tr.CacheRead, t.CacheRead}, {&tr.CacheWrite, t.CacheWrite}} {
				if f.v != nil {
					*f.dst = PerMillion(*f.v)
				}
			}
			e.Tiers = append(e.Tiers, tr)
		}
		e.Override = append(e.Override, "tiers")
	}
}

var dateSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// Bedrock names a model with a cross-region prefix, its vendor and a
// version ("us.anthropic.claude-sonnet-4-5-20250929-v1:0",
// "amazon.nova-pro-v1:0"); Vertex AI puts "@" before a Claude date
// ("claude-sonnet-4-5@20250929").
var (
	bedrockGeo     = regexp.MustCompile(`^(us|eu|apac|global|jp|au|ca|us-gov)\.`)
	bedrockVendor  = regexp.MustCompile(`^(amazon|anthropic|meta|mistral|cohere|ai21|deepseek|openai|qwen|writer)\.`)
	bedrockVersion = regexp.MustCompile(`-v\d+(:\d+)?$`)
)

// cloudNames are the names a cloud's model id may be catalogued under:
// the Bedrock id without region and version ("amazon.nova-pro"), then
// without its vendor ("claude-sonnet-4-5-20250929"); the Vertex AI name
// with a dash for its "@".
func cloudNames(model string) []string {
	if strings.Contains(model, "@") {
		return []string{strings.Replace(model, "@", "-", 1)}
	}
	id := bedrockGeo.ReplaceAllString(model, "")
	if !bedrockVendor.MatchString(id) {
		return nil
	}
	id = bedrockVersion.ReplaceAllString(id, "")
	_, bare, _ := strings.Cut(id, ".")
	return []string{id, bare}
}

// find looks a provider model name up in the built-in catalog: as given,
// lower-cased, without a "models/" prefix, by its last path segment
// ("accounts/x/models/m", "openai/gpt-4o"), then without a date suffix.
func (c *Catalog) find(model string) (*Entry, bool) {
	if v, ok := c.found.Load(model); ok {
		e := v.(*Entry)
		return e, e != nil
	}
	e, ok := c.search(model)
	if c.nfound.Load() < maxFound {
		c.nfound.Add(1)
		c.found.Store(model, e)
	}
	return e, ok
}

func (c *Catalog) search(model string) (*Entry, bool) {
	try := func(n string) (*Entry, bool) {
		if e, ok := c.byName[n]; ok {
			return e, true
		}
		e, ok := c.byName[strings.ToLower(n)]
		return e, ok
	}
	cands := []string{model, strings.TrimPrefix(model, "models/")}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		cands = append(cands, model[i+1:])
	}
	cands = append(cands, cloudNames(cands[len(cands)-1])...)
	for _, n := range cands {
		if e, ok := try(n); ok {
			return e, true
		}
	}
	for _, n := range cands {
		if s := dateSuffix.ReplaceAllString(n, ""); s != n {
			if e, ok := try(s); ok {
				return e, true
			}
		}
	}
	return nil, false
}

// Lookup returns the effective entry of a provider's model: the config's
// override when there is one, else the built-in entry.
func (c *Catalog) Lookup(provider, model string) (*Entry, bool) {
	if e, ok := c.overrides[provider][model]; ok {
		return e, true
	}
	return c.find(model)
}

// FamilyOf returns the hosted family of a provider, by type (anthropic,
// gemini) or by the host of its base URL; ok is false for a server the
// catalog does not know, taken as self-hosted.
func (c *Catalog) FamilyOf(providerType, baseURL string) (Family, bool) {
	byName := func(n string) (Family, bool) {
		for _, f := range c.families {
			if f.Name == n {
				return f, true
			}
		}
		return Family{}, false
	}
	switch providerType {
	case config.TypeAnthropic:
		return byName("anthropic")
	case config.TypeGemini:
		return byName("gemini")
	case config.TypeMock:
		return Family{}, false
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return Family{}, false
	}
	host := strings.ToLower(u.Hostname())
	for _, f := range c.families {
		for _, h := range f.Hosts {
			if host == h || strings.HasSuffix(host, "."+h) {
				return f, true
			}
		}
	}
	return Family{}, false
}

// RatesAt returns the rates that apply to a prompt of input tokens: the
// highest tier below it, with unknown tier fields taken from the base.
func (e *Entry) RatesAt(input int64) Rates {
	r := e.Rates
	for _, t := range e.Tiers {
		if input > t.Above {
			r = merge(e.Rates, t.Rates)
		}
	}
	return r
}

func merge(base, over Rates) Rates {
	pick := func(b, o int64) int64 {
		if o != Unknown {
			return o
		}
		return b
	}
	return Rates{pick(base.Input, over.Input), pick(base.Output, over.Output), pick(base.CacheRead, over.CacheRead),
		pick(base.CacheWrite, over.CacheWrite), pick(base.InputMedia, over.InputMedia)}
}

// Highest is the largest known rate, used for a token class without a
// price.
func (r Rates) Highest() int64 {
	return max(r.Input, r.Output, r.CacheRead, r.CacheWrite, r.InputMedia)
}

// Priced reports whether input and output rates are known.
func (e *Entry) Priced() bool { return e.Input != Unknown && e.Output != Unknown }
