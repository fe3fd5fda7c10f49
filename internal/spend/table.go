package spend

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Row is one line of the effective price table (`switchboard prices`).
// Prices are USD per million tokens as exact decimals, "-" when unknown.
type Row struct {
	// Provider is the config provider of an override; "" for the catalog.
	Provider   string `json:"provider,omitempty"`
	Model      string `json:"model"`
	Family     string `json:"family,omitempty"`
	Input      string `json:"input"`
	Output     string `json:"output"`
	CacheRead  string `json:"cache_read"`
	CacheWrite string `json:"cache_write"`
	Tiers      string `json:"tiers,omitempty"`
	Context    string `json:"context"`
	MaxOutput  string `json:"max_output"`
	Source     string `json:"source"`
	Date       string `json:"date,omitempty"`
	// Override lists the fields the config set.
	Override []string `json:"override,omitempty"`
}

func price(r int64) string {
	if r == Unknown {
		return "-"
	}
	return FormatUSD(r)
}

func tokens(n int64) string {
	if n == Unknown {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func rowOf(provider string, e *Entry) Row {
	r := Row{Provider: provider, Model: e.Model, Family: e.Family, Input: price(e.Input), Output: price(e.Output),
		CacheRead: price(e.CacheRead), CacheWrite: price(e.CacheWrite), Context: tokens(e.Context),
		MaxOutput: tokens(e.MaxOutput), Source: e.Source, Date: e.Date, Override: e.Override}
	var ts []string
	for _, t := range e.Tiers {
		rt := merge(e.Rates, t.Rates)
		ts = append(ts, fmt.Sprintf(">%d: %s/%s", t.Above, price(rt.Input), price(rt.Output)))
	}
	r.Tiers = strings.Join(ts, "; ")
	return r
}

// Rows lists the config's overrides (sorted by provider and model), then
// the built-in catalog in its file order.
func (c *Catalog) Rows() []Row {
	var out []Row
	provs := make([]string, 0, len(c.overrides))
	for p := range c.overrides {
		provs = append(provs, p)
	}
	slices.Sort(provs)
	for _, p := range provs {
		models := make([]string, 0, len(c.overrides[p]))
		for m := range c.overrides[p] {
			models = append(models, m)
		}
		slices.Sort(models)
		for _, m := range models {
			out = append(out, rowOf(p, c.overrides[p][m]))
		}
	}
	for _, e := range c.entries {
		out = append(out, rowOf("", e))
	}
	return out
}

// WriteTable prints Rows as aligned text.
func (c *Catalog) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tINPUT\tOUTPUT\tCACHE_READ\tCACHE_WRITE\tCONTEXT\tMAX_OUTPUT\tTIERS\tSOURCE\tDATE")
	for _, r := range c.Rows() {
		p := r.Provider
		if p == "" {
			p = "(catalog)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p, r.Model, r.Input, r.Output, r.CacheRead,
			r.CacheWrite, r.Context, r.MaxOutput, dash(r.Tiers), r.Source, dash(r.Date))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
