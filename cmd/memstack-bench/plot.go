package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot geometry: about 860×530 px in a browser.
const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 5.5 * vg.Inch
)

// pairColors are the colours of the memory pairs (subject.pair): a memstack
// memory and its langchaingo counterpart share one.
var pairColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue: Buffer, ConversationBuffer
	{R: 0xe6, G: 0x7e, B: 0x0e, A: 0xff}, // orange: RecentN, ConversationWindowBuffer
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green: TokenWindow, ConversationTokenBuffer
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple: Summary
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red: CombinedMemory
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown: spare
	{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan: spare
}

// plotCPULabel is the Y axis label when the plot shows CPU time.
const plotCPULabel = "CPU time per turn (log scale)"

// svgFontFamily is what the SVG names the plot's font: Liberation Sans,
// whose metrics (used for the layout) match Arial's and Helvetica's, so
// viewers without it fall back to a look-alike rather than to a serif.
const svgFontFamily = "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"

// renderPlot draws the cost of one turn against history length, log-log,
// one line per memory (memstack solid with filled circles, langchaingo
// dashed with hollow squares, counterparts in one colour), as an SVG.
//
// The cost plotted is the process CPU time per turn when the platform
// gives it (the benchmarks run on shared machines, where wall-clock time
// also counts the time spent waiting for a core), else the wall-clock time;
// the axis label says which. Both are in the report's tables.
func renderPlot(r *results) ([]byte, error) {
	useCPU := len(r.turns) > 0
	for _, s := range r.turns {
		for _, pt := range s.points {
			useCPU = useCPU && !math.IsNaN(pt.cpu) && pt.cpu > 0
		}
	}
	cost := func(pt turnPoint) float64 { return pt.ns }
	yLabel := "wall-clock time per turn (log scale)"
	if useCPU {
		cost = func(pt turnPoint) float64 { return pt.cpu }
		yLabel = plotCPULabel
	}

	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	plot.DefaultFont = sans
	plotter.DefaultFont = sans

	p := plot.New()
	p.Title.Text = "Cost of one turn (SaveContext + LoadMemoryVariables) vs history length"
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "history length (messages, log scale)"
	p.Y.Label.Text = yLabel
	// At the top of the axis: gonum sizes a centred label's box at the
	// linear midpoint of the range, which on a log axis lies near the top
	// and would push the data area down.
	p.Y.Label.Position = draw.PosTop
	p.X.Label.TextStyle.Font.Size = vg.Points(12)
	p.Y.Label.TextStyle.Font.Size = vg.Points(12)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}

	var xTicks []plot.Tick
	for _, n := range r.cfg.sizes {
		xTicks = append(xTicks, plot.Tick{Value: float64(n), Label: fmtCount(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xTicks)
	p.Y.Tick.Marker = durationTicks{}
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)

	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xdd}
	grid.Horizontal.Color = color.Gray{Y: 0xdd}
	p.Add(grid)

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range r.turns {
		xys := make(plotter.XYs, len(s.points))
		for i, pt := range s.points {
			xys[i] = plotter.XY{X: float64(pt.n), Y: cost(pt)}
			lo, hi = min(lo, xys[i].Y), max(hi, xys[i].Y)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", s.label(), err)
		}
		c := pairColors[s.pair%len(pairColors)]
		line.Color = c
		line.Width = vg.Points(2)
		points.Color = c
		points.Radius = vg.Points(3.5)
		if s.library == libLangchaingo {
			line.Dashes = []vg.Length{vg.Points(7), vg.Points(4)}
			points.Shape = draw.BoxGlyph{}
			// A hollow square: a white box under a coloured outline.
			hollow, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			hollow.Color = color.White
			hollow.Radius = vg.Points(2)
			hollow.Shape = draw.BoxGlyph{}
			p.Add(line, points, hollow)
			p.Legend.Add(s.label(), line, points, hollow)
		} else {
			points.Shape = draw.CircleGlyph{}
			p.Add(line, points)
			p.Legend.Add(s.label(), line, points)
		}
	}
	if len(r.turns) > 0 {
		// Room above the data for the legend (top left, where the cheap
		// small histories leave the plot empty).
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi*8)))
		p.X.Min = float64(r.cfg.sizes[0]) / 1.25
		p.X.Max = float64(r.cfg.sizes[len(r.cfg.sizes)-1]) * 1.25
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-6)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.Legend.ThumbnailWidth = vg.Points(36)
	p.Legend.Padding = vg.Points(1)

	wt, err := p.WriterTo(plotWidth, plotHeight, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return fixFontFamily(buf.Bytes()), nil
}

// fixFontFamily replaces the SVG's font-family declarations with
// svgFontFamily (a list with fallbacks; gonum names the one font only).
func fixFontFamily(svg []byte) []byte {
	s := string(svg)
	var b strings.Builder
	for {
		i := strings.Index(s, "font-family:")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.IndexByte(s[i:], ';')
		if j < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		b.WriteString(svgFontFamily)
		s = s[i+j+1:]
	}
	return []byte(b.String())
}

// durationTicks marks a log axis of nanoseconds: a labelled major tick at
// each power of ten ("1 µs", "10 µs", "100 µs", "1 ms", ...) and unlabelled
// minor ticks at 2..9 times it.
type durationTicks struct{}

func (durationTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= 0 || lo > hi {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for k := 1.0; k < 10; k++ {
			v := k * base
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if k == 1 {
				t.Label = fmtPow(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// fmtPow labels a power of ten of nanoseconds: 1 ns, 10 ns, 100 ns, 1 µs, ...
func fmtPow(ns float64) string {
	units := []struct {
		scale float64
		name  string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1, "ns"}}
	for _, u := range units {
		if ns >= u.scale*0.999 {
			return fmt.Sprintf("%.0f %s", ns/u.scale, u.name)
		}
	}
	return fmt.Sprintf("%g ns", ns)
}
