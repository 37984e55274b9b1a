// Package benchfmt prints benchmark results the same way for every warpkit
// structure: a header naming the device, date and commit, then aligned tables
// (or one JSON document with --json). Rates are printed beside ratios to a
// baseline measured in the same run; nothing here judges timings.
package benchfmt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one benchmark run.
type Report struct {
	Title  string   `json:"title"`
	Device string   `json:"device"`
	Date   string   `json:"date"`
	Commit string   `json:"commit"`
	Tables []*Table `json:"tables"`
	Notes  []string `json:"notes,omitempty"`

	live io.Writer // set by Stream: text is written as results arrive
}

// Table is a titled grid. Cells keep their Go values so JSON has numbers.
type Table struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`

	live io.Writer
}

// liveWidth is the minimum column width of streamed rows.
const liveWidth = 10

func (t *Table) writeLive(cells []string) {
	var b strings.Builder
	for i, c := range cells {
		w := max(liveWidth, len(t.Columns[i]))
		fmt.Fprintf(&b, "%*s  ", w, c)
	}
	fmt.Fprintln(t.live, strings.TrimRight(b.String(), " "))
}

// NewReport starts a report stamped with today's date and the build's commit.
func NewReport(title, device string) *Report {
	return &Report{Title: title, Device: device, Date: time.Now().UTC().Format("2006-01-02"), Commit: Commit()}
}

// Stream makes the report print as it goes, in text: the header now, each
// table's name and columns when it is added, each row as soon as it is added
// (in columns of fixed width), each note at once. A long run stopped by a
// timeout then loses nothing it measured. Print afterwards writes nothing more
// in text mode; JSON output (Print with asJSON) is unaffected.
func (r *Report) Stream(w io.Writer) {
	r.live = w
	fmt.Fprintf(w, "%s\ndevice: %s   date: %s   commit: %s\n", r.Title, r.Device, r.Date, r.Commit)
}

// Table adds a table with the given columns and returns it.
func (r *Report) Table(name string, columns ...string) *Table {
	t := &Table{Name: name, Columns: columns, live: r.live}
	r.Tables = append(r.Tables, t)
	if t.live != nil {
		fmt.Fprintf(t.live, "\n%s\n", name)
		t.writeLive(columns)
	}
	return t
}

// Note adds a line printed after the tables (at once when streaming).
func (r *Report) Note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	r.Notes = append(r.Notes, n)
	if r.live != nil {
		fmt.Fprintln(r.live, n)
	}
}

// Add appends a row; it must have one cell per column.
func (t *Table) Add(cells ...any) {
	if len(cells) != len(t.Columns) {
		panic(fmt.Sprintf("benchfmt: row of %d cells in table %q of %d columns", len(cells), t.Name, len(t.Columns)))
	}
	t.Rows = append(t.Rows, cells)
	if t.live != nil {
		text := make([]string, len(cells))
		for i, c := range cells {
			text[i] = Cell(c)
		}
		t.writeLive(text)
	}
}

// Print writes the report as text tables, or as indented JSON.
func (r *Report) Print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	if r.live != nil {
		return nil // already written
	}
	fmt.Fprintf(w, "%s\ndevice: %s   date: %s   commit: %s\n", r.Title, r.Device, r.Date, r.Commit)
	for _, t := range r.Tables {
		fmt.Fprintf(w, "\n%s\n", t.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(t.Columns, "\t")+"\t")
		for _, row := range t.Rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = Cell(c)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// Cell formats one value: floats with three significant digits, the rest %v.
func Cell(v any) string {
	switch x := v.(type) {
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case time.Duration:
		return x.Round(time.Microsecond).String()
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x >= 100 || x <= -100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10 || x <= -10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

// stampedCommit is set at link time by scripts/gpu-test.sh
// (-X github.com/warpkit/warpkit/internal/benchfmt.stampedCommit=...), for
// builds where Go's own VCS stamping is off or absent (test binaries).
var stampedCommit string

// Commit returns the revision the binary was built from (12 hex digits,
// "+dirty" when the tree had changes): the link-time stamp if there is one,
// else Go's VCS stamp, else what git says of the current directory (for
// `go run`, where stamping may be off), else "unknown".
func Commit() string {
	if stampedCommit != "" {
		return stampedCommit
	}
	if c := buildInfoCommit(); c != "" {
		return c
	}
	if c := gitCommit(); c != "" {
		return c
	}
	return "unknown"
}

func buildInfoCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	return shortRev(rev, dirty)
}

func gitCommit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rev, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return ""
	}
	return shortRev(strings.TrimSpace(string(rev)), len(bytes.TrimSpace(status)) > 0)
}

func shortRev(rev string, dirty bool) string {
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// Rate returns count/d in units of per second, scaled by unit (1e9 for G/s).
func Rate(count int64, d time.Duration, unit float64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(count) / d.Seconds() / unit
}
