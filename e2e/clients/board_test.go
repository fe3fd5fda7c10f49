//go:build clients

package clients

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// matrixOut, when set, receives the matrix as a Markdown table.
var matrixOut = flag.String("matrix", os.Getenv("SWITCHBOARD_MATRIX"), "also write the client matrix (Markdown) to this file")

// result is one cell's outcome.
type result struct {
	cell   string // client/provider/case
	pass   bool
	reason string
	took   time.Duration
}

// board collects the cells' results for the final matrix.
var board struct {
	sync.Mutex
	rows []result
}

func record(r result) {
	board.Lock()
	board.rows = append(board.rows, r)
	board.Unlock()
}

// cell runs one matrix cell as a subtest; its name in the matrix is the
// subtest's name without the top-level test's (client/provider/case). fn
// returns why the cell fails (nil: it passes); a cell that fails through t
// (Fatal, a panic) is recorded as failed too, with "see the test log".
func cell(t *testing.T, sub string, fn func(t *testing.T) error) {
	t.Helper()
	timedCell(t, sub, 0, fn)
}

// timedCell is cell for a judgement of work done before it (an agent's
// run): took is that work's time, shown in the matrix.
func timedCell(t *testing.T, sub string, took time.Duration, fn func(t *testing.T) error) {
	t.Helper()
	t.Run(sub, func(t *testing.T) {
		name := t.Name()
		if i := strings.Index(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		start := time.Now().Add(-took)
		done := false
		t.Cleanup(func() {
			if !done {
				record(result{cell: name, reason: "stopped early: see the test log", took: time.Since(start)})
			}
		})
		err := fn(t)
		done = true
		switch {
		case err != nil:
			record(result{cell: name, reason: err.Error(), took: time.Since(start)})
			t.Error(err)
		case t.Failed():
			record(result{cell: name, reason: "see the test log", took: time.Since(start)})
		default:
			record(result{cell: name, pass: true, took: time.Since(start)})
		}
	})
}

// oneLine squeezes a reason onto one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// printMatrix writes the per-cell table and a client x provider grid.
func printMatrix(w io.Writer, markdown bool) {
	board.Lock()
	rows := append([]result(nil), board.rows...)
	board.Unlock()
	if len(rows) == 0 {
		return
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].cell < rows[j].cell })
	passed := 0
	type tally struct{ pass, all int }
	grid := map[string]map[string]*tally{}
	var clients, providers []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.pass {
			passed++
		}
		parts := strings.SplitN(r.cell, "/", 3)
		c, p := parts[0], ""
		if len(parts) > 1 {
			p = parts[1]
		}
		if grid[c] == nil {
			grid[c] = map[string]*tally{}
			clients = append(clients, c)
		}
		if !seen[p] {
			seen[p] = true
			providers = append(providers, p)
		}
		if grid[c][p] == nil {
			grid[c][p] = &tally{}
		}
		grid[c][p].all++
		if r.pass {
			grid[c][p].pass++
		}
	}
	sort.Strings(providers)
	if markdown {
		fmt.Fprintf(w, "# Client matrix: %d of %d cells pass\n\n", passed, len(rows))
		fmt.Fprintf(w, "| client | %s |\n|---|%s\n", strings.Join(providers, " | "), strings.Repeat("---|", len(providers)))
		for _, c := range clients {
			fmt.Fprintf(w, "| %s |", c)
			for _, p := range providers {
				if t := grid[c][p]; t != nil {
					fmt.Fprintf(w, " %d/%d |", t.pass, t.all)
				} else {
					fmt.Fprint(w, " |")
				}
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "\n| cell | result | time | reason |\n|---|---|---|---|\n")
		for _, r := range rows {
			res := "pass"
			if !r.pass {
				res = "FAIL"
			}
			fmt.Fprintf(w, "| %s | %s | %.1fs | %s |\n", r.cell, res, r.took.Seconds(),
				strings.ReplaceAll(oneLine(r.reason, 400), "|", `\|`))
		}
		return
	}
	fmt.Fprintf(w, "\n==== client matrix: %d of %d cells pass ====\n", passed, len(rows))
	width := len("client")
	for _, c := range clients {
		width = max(width, len(c))
	}
	fmt.Fprintf(w, "%-*s", width, "client")
	for _, p := range providers {
		fmt.Fprintf(w, " %-10s", p)
	}
	fmt.Fprintln(w)
	for _, c := range clients {
		fmt.Fprintf(w, "%-*s", width, c)
		for _, p := range providers {
			if t := grid[c][p]; t != nil {
				fmt.Fprintf(w, " %-10s", fmt.Sprintf("%d/%d", t.pass, t.all))
			} else {
				fmt.Fprintf(w, " %-10s", "")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		res := "pass"
		if !r.pass {
			res = "FAIL"
		}
		fmt.Fprintf(w, "%-4s %6.1fs  %s", res, r.took.Seconds(), r.cell)
		if !r.pass {
			fmt.Fprintf(w, "\n              %s", oneLine(r.reason, 300))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "==== %d of %d cells pass ====\n", passed, len(rows))
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	printMatrix(os.Stdout, false)
	if *matrixOut != "" {
		f, err := os.Create(*matrixOut)
		if err == nil {
			printMatrix(f, true)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "matrix:", err)
		}
	}
	cleanup()
	os.Exit(code)
}
