// Package benchplot draws the tables of a benchfmt.Report as plots, one PNG
// and one SVG per table (Write). It is apart from benchfmt so that programs
// printing reports without plots (bench/peers, a module of its own) do not
// need gonum/plot.
package benchplot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/warpkit/warpkit/internal/benchfmt"
)

// Any table can be drawn (Plot) and a whole report written as files (Write),
// one PNG and one SVG per table, named by the table's slug (Slug). The rules:
//
//   - The title is the table's name (wrapped).
//   - Series: the columns whose cells are all floating-point numbers (or
//     strings that parse as one), cells "", "-" and NaN being gaps. Integer
//     and time.Duration columns (sizes, counts, heights, the time of prim's
//     table) are parameters beside floating-point measurements and are
//     plotted only in a table that has no floating-point column (durations
//     in µs). Text columns ("1.23x", "met") are never series.
//   - Line chart: when the first column is an axis, that is, at least two of
//     its cells parse as x values and these are strictly increasing or
//     decreasing down the table. x values are "2^k" (a log2 axis), sizes
//     with a K, M or G suffix such as "64K" and "45M" (binary multiples; a
//     log2 axis), and plain numbers or percentages such as "0.6", 1024 and
//     "10%" (a linear axis). Rows whose first cell is no x value (a "mean"
//     row) are left out of the line chart. Each series is one line with
//     points; ticks sit at the rows' x values, labelled as in the table. The
//     y axis is logarithmic when every value is positive and they span three
//     decades or more.
//   - Grouped bar chart (horizontal bars, one group per row, one bar per
//     series) for every other table: rows are labelled by their text and
//     integer cells left of the first series column (else by all their text
//     cells, else "row N"); all bars share one linear axis.
//   - A table without rows or without a series is not plotted; Write
//     says so in a note.

// plotWidth is the width of every plot; line charts are plotHeight high,
// bar charts grow with their bars.
const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 6 * vg.Inch
)

// Finish ends a benchmark command: with dir given it writes the plots
// (Write), then prints r to w as text or JSON.
func Finish(r *benchfmt.Report, w io.Writer, asJSON bool, dir string) error {
	if dir != "" {
		if _, err := Write(r, dir); err != nil {
			return err
		}
	}
	return r.Print(w, asJSON)
}

// Write writes each table of r as dir/<slug>.png and dir/<slug>.svg
// (creating dir), and adds a note to r naming dir, the number of tables
// written and each table left out with the reason. It returns the paths
// written; an error is a file that could not be written.
func Write(r *benchfmt.Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	var skipped []string
	used := map[string]int{}
	for _, t := range r.Tables {
		p, w, h, err := Plot(t)
		if err != nil {
			var np *NotPlottable
			if errors.As(err, &np) {
				skipped = append(skipped, fmt.Sprintf("%q (%s)", t.Name, np.Why))
				continue
			}
			return written, fmt.Errorf("plot of %q: %w", t.Name, err)
		}
		slug := Slug(t.Name)
		used[slug]++
		if n := used[slug]; n > 1 {
			slug = fmt.Sprintf("%s-%d", slug, n)
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, slug+ext)
			if err := p.Save(w, h, path); err != nil {
				return written, fmt.Errorf("plot of %q: %w", t.Name, err)
			}
			written = append(written, path)
		}
	}
	r.Note("plots: %d of %d tables written to %s as <table>.png and <table>.svg", len(written)/2, len(r.Tables), dir)
	for _, s := range skipped {
		r.Note("plots: not plotted: %s", s)
	}
	return written, nil
}

// NotPlottable is Plot's error for a table it cannot draw.
type NotPlottable struct{ Why string }

func (e *NotPlottable) Error() string { return "not plottable: " + e.Why }

// Slug is a file name for a table name: lower-case letters and digits, runs
// of anything else as one '-', at most 64 bytes (cut at a '-'), "table" if
// nothing is left.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
		if i := strings.LastIndexByte(s, '-'); i > 0 {
			s = s[:i]
		}
	}
	if s == "" {
		s = "table"
	}
	return s
}

// cellKind classifies a cell for plotting.
type cellKind int

const (
	cellGap   cellKind = iota // "", "-", NaN: no value
	cellFloat                 // a measurement
	cellInt                   // a size or count
	cellDur                   // a time.Duration (in µs)
	cellText
)

func plotCell(c any) (float64, cellKind) {
	switch x := c.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, cellGap
		}
		return x, cellFloat
	case float32:
		return plotCell(float64(x))
	case int:
		return float64(x), cellInt
	case int8:
		return float64(x), cellInt
	case int16:
		return float64(x), cellInt
	case int32:
		return float64(x), cellInt
	case int64:
		return float64(x), cellInt
	case uint:
		return float64(x), cellInt
	case uint8:
		return float64(x), cellInt
	case uint16:
		return float64(x), cellInt
	case uint32:
		return float64(x), cellInt
	case uint64:
		return float64(x), cellInt
	case time.Duration:
		return float64(x.Nanoseconds()) / 1e3, cellDur
	case string:
		s := strings.TrimSpace(x)
		if s == "" || s == "-" {
			return 0, cellGap
		}
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return plotCell(v)
		}
	}
	return 0, cellText
}

// xCell parses a first-column cell as an x value; log reports an axis that
// wants a log2 scale ("2^k", "64K").
func xCell(c any) (x float64, log, ok bool) {
	if s, isStr := c.(string); isStr {
		s = strings.TrimSpace(s)
		if k, found := strings.CutPrefix(s, "2^"); found {
			e, err := strconv.Atoi(k)
			return math.Ldexp(1, e), true, err == nil
		}
		if v, found := strings.CutSuffix(s, "%"); found {
			f, err := strconv.ParseFloat(v, 64)
			return f, false, err == nil
		}
		for suffix, shift := range map[string]int{"K": 10, "k": 10, "M": 20, "G": 30} {
			if v, found := strings.CutSuffix(s, suffix); found {
				f, err := strconv.ParseFloat(v, 64)
				return math.Ldexp(f, shift), true, err == nil && f > 0
			}
		}
	}
	v, kind := plotCell(c)
	return v, false, kind == cellFloat || kind == cellInt
}

// series is one plotted column.
type series struct {
	col  int
	name string
}

// layout is how a table is drawn.
type layout struct {
	line   bool      // a line chart over the first column; else grouped bars
	logX   bool      // the line chart's x axis is log2
	rows   []int     // the rows drawn
	xs     []float64 // line chart: the rows' x values
	series []series
}

// tableLayout decides how t is drawn (see the rules above).
func tableLayout(t *benchfmt.Table) (layout, error) {
	var l layout
	if len(t.Rows) == 0 {
		return l, &NotPlottable{"no rows"}
	}
	// The first column is an axis if enough of it parses, in order.
	l.logX = true
	for i, row := range t.Rows {
		if x, log, ok := xCell(row[0]); ok {
			l.xs, l.rows = append(l.xs, x), append(l.rows, i)
			l.logX = l.logX && log && x > 0
		}
	}
	l.line = len(l.xs) >= 2 && monotone(l.xs)
	first := 1
	if !l.line {
		l.rows, l.xs, l.logX = make([]int, len(t.Rows)), nil, false
		for i := range l.rows {
			l.rows[i] = i
		}
		first = 0
	}
	l.series = columnSeries(t, l.rows, first)
	if len(l.series) == 0 {
		return l, &NotPlottable{"no numeric column"}
	}
	return l, nil
}

// Plot draws t as described above and returns the plot with its size. A
// table it cannot draw returns a *NotPlottable error.
func Plot(t *benchfmt.Table) (*plot.Plot, vg.Length, vg.Length, error) {
	l, err := tableLayout(t)
	if err != nil {
		return nil, 0, 0, err
	}
	p := plot.New()
	p.Title.Text = wrap(t.Name, 90)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.Top = true
	if l.line {
		return linePlot(t, p, l.series, l.rows, l.xs, l.logX)
	}
	return barPlot(t, p, l.series, l.rows)
}

func monotone(xs []float64) bool {
	up, down := true, true
	for i := 1; i < len(xs); i++ {
		up = up && xs[i] > xs[i-1]
		down = down && xs[i] < xs[i-1]
	}
	return up || down
}

// columnSeries returns the plotted columns of rows, from column first on.
func columnSeries(t *benchfmt.Table, rows []int, first int) []series {
	kinds := make([]cellKind, len(t.Columns)) // per column: cellGap (all gaps), a numeric kind, or cellText
	for c := first; c < len(t.Columns); c++ {
		k := cellGap
		for _, r := range rows {
			_, ck := plotCell(t.Rows[r][c])
			switch {
			case ck == cellGap:
				continue
			case k == cellGap:
				k = ck
			case k == ck:
			case (k == cellFloat || k == cellInt) && (ck == cellFloat || ck == cellInt):
				k = cellFloat // a float column with a whole number in it
			default:
				k = cellText // text, or durations mixed with numbers
			}
			if k == cellText {
				break
			}
		}
		kinds[c] = k
	}
	want := cellFloat
	if !contains(kinds[first:], cellFloat) {
		want = cellInt
	}
	names := columnNames(t.Columns)
	var out []series
	for c := first; c < len(t.Columns); c++ {
		if kinds[c] == want || want == cellInt && kinds[c] == cellDur {
			name := names[c]
			if kinds[c] == cellDur {
				name += " (µs)"
			}
			out = append(out, series{c, name})
		}
	}
	return out
}

func contains(ks []cellKind, k cellKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// columnNames makes repeated column names ("x" after each rate) distinct by
// the nearest column before them with a name of its own: "x (build)".
func columnNames(cols []string) []string {
	count := map[string]int{}
	for _, c := range cols {
		count[c]++
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c
		if count[c] < 2 {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if count[cols[j]] == 1 {
				out[i] = fmt.Sprintf("%s (%s)", c, cols[j])
				break
			}
		}
	}
	return out
}

func linePlot(t *benchfmt.Table, p *plot.Plot, ser []series, rows []int, xs []float64, logX bool) (*plot.Plot, vg.Length, vg.Length, error) {
	p.X.Label.Text = t.Columns[0]
	var ticks []plot.Tick
	step := (len(rows) + 11) / 12 // at most 12 labels
	for i, r := range rows {
		label := ""
		if i%step == 0 || i == len(rows)-1 {
			label = benchfmt.Cell(t.Rows[r][0])
		}
		ticks = append(ticks, plot.Tick{Value: xs[i], Label: label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ser {
		for _, r := range rows {
			if v, k := plotCell(t.Rows[r][s.col]); k != cellGap {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if lo > 0 && hi/lo >= 1000 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, s := range ser {
		// A gap splits the line; the legend shows the series once.
		var segs []plotter.XYs
		var cur plotter.XYs
		for j, r := range rows {
			v, k := plotCell(t.Rows[r][s.col])
			if k == cellGap {
				if len(cur) > 0 {
					segs, cur = append(segs, cur), nil
				}
				continue
			}
			cur = append(cur, plotter.XY{X: xs[j], Y: v})
		}
		if len(cur) > 0 {
			segs = append(segs, cur)
		}
		for j, seg := range segs {
			l, pts, err := plotter.NewLinePoints(seg)
			if err != nil {
				return nil, 0, 0, err
			}
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			l.Width = vg.Points(1.5)
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			if j == 0 {
				p.Legend.Add(s.name, l, pts)
			}
		}
	}
	// Headroom above the lines for the legend in the top right corner.
	room := legendShare(len(ser), plotHeight)
	if _, log := p.Y.Scale.(plot.LogScale); log {
		p.Y.Max = p.Y.Max * math.Pow(p.Y.Max/p.Y.Min, room/(1-room))
	} else {
		p.Y.Max += (p.Y.Max - p.Y.Min) * room / (1 - room)
	}
	return p, plotWidth, plotHeight, nil
}

// legendShare is the share of a plot of height h that a legend of n entries
// takes, with some margin.
func legendShare(n int, h vg.Length) float64 {
	return math.Min(0.6, float64(vg.Points(12*float64(n)+30)/h))
}

func barPlot(t *benchfmt.Table, p *plot.Plot, ser []series, rows []int) (*plot.Plot, vg.Length, vg.Length, error) {
	labels := rowLabels(t, rows, ser[0].col)
	n, k := len(rows), len(ser)
	// Horizontal bars, the first row at the top: bar i of a series is row
	// n-1-i.
	names := make([]string, n)
	for i := range labels {
		names[n-1-i] = labels[i]
	}
	// The height grows with the bars; the bars fill 80% of their row.
	titleLines := strings.Count(p.Title.Text, "\n") + 1
	frame := vg.Inch + vg.Points(14*float64(titleLines)) // title, axis, margins
	rowGap := vg.Points(math.Max(18, float64(8*k+8)))
	h := vg.Length(math.Max(float64(rowGap*vg.Length(n)+frame), float64(3*vg.Inch)))
	barW := (h - frame) / vg.Length(n) * 0.8 / vg.Length(k)
	hi := 0.0
	for i, s := range ser {
		vals := make(plotter.Values, n)
		for j, r := range rows {
			if v, kind := plotCell(t.Rows[r][s.col]); kind != cellGap {
				vals[n-1-j] = v
				hi = math.Max(hi, v)
			}
		}
		b, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return nil, 0, 0, err
		}
		b.Horizontal = true
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		// Series i sits at its place in the group; the first on top.
		b.Offset = barW * vg.Length(float64(k-1)/2-float64(i))
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	p.NominalY(names...)
	p.X.Min = math.Min(p.X.Min, 0)
	p.X.Max = math.Max(p.X.Max, hi*1.3) // room for the legend on the right
	return p, plotWidth, h, nil
}

// rowLabels names the bar groups: the text and integer cells left of the
// first series column, else every text cell, else "row N".
func rowLabels(t *benchfmt.Table, rows []int, firstSeries int) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var parts []string
		for c := 0; c < firstSeries; c++ {
			if _, k := plotCell(t.Rows[r][c]); k == cellText || k == cellInt {
				parts = append(parts, benchfmt.Cell(t.Rows[r][c]))
			}
		}
		if len(parts) == 0 {
			for c := range t.Columns {
				if _, k := plotCell(t.Rows[r][c]); k == cellText {
					parts = append(parts, benchfmt.Cell(t.Rows[r][c]))
				}
			}
		}
		if len(parts) == 0 {
			parts = []string{fmt.Sprintf("row %d", r+1)}
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}

// wrap breaks s into lines of at most width bytes at spaces.
func wrap(s string, width int) string {
	var lines []string
	for len(s) > width {
		i := strings.LastIndexByte(s[:width], ' ')
		if i <= 0 {
			break
		}
		lines, s = append(lines, s[:i]), s[i+1:]
	}
	return strings.Join(append(lines, s), "\n")
}
