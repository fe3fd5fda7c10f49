package spend

import (
	"strconv"
	"testing"
)

// Lookups are remembered, answers unchanged, and the memory of client-made
// model names stays bounded.
func TestCatalogLookupMemo(t *testing.T) {
	c := New(nil)
	for _, name := range []string{"gpt-4o", "gpt-4o-2024-08-06", "openai/gpt-4o", "no-such-model"} {
		e1, ok1 := c.Lookup("p", name)
		e2, ok2 := c.Lookup("p", name) // from the memo
		w, wok := c.search(name)
		if e1 != e2 || ok1 != ok2 || e1 != w || ok1 != wok {
			t.Errorf("%s: first %v/%v, memo %v/%v, search %v/%v", name, e1, ok1, e2, ok2, w, wok)
		}
	}
	for i := range 2 * maxFound {
		c.Lookup("p", "client-model-"+strconv.Itoa(i))
	}
	n := 0
	c.found.Range(func(any, any) bool { n++; return true })
	if n > maxFound {
		t.Fatalf("memo holds %d names, bound is %d", n, maxFound)
	}
}

func TestCatalogLookupMemoFindsDatedNames(t *testing.T) {
	c := New(nil)
	for range 2 {
		if _, ok := c.Lookup("p", "gpt-4o-2024-08-06"); !ok {
			t.Fatal("gpt-4o-2024-08-06 not priced: the date suffix should fall back to gpt-4o")
		}
	}
}
