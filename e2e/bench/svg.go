package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// Series is one line of a chart.
type Series struct {
	Name  string
	Color string
	Dash  bool
	X, Y  []float64
}

// Chart is a line chart written as a self-contained SVG, no dependencies.
type Chart struct {
	Title, XLabel, YLabel string
	LogX                  bool      // logarithmic x axis (e.g. clients 1..200)
	XTicks                []float64 // x tick positions; default: nice ticks
	Series                []Series
	Width, Height         int
}

// Palette for series colours.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || n <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// fmtTick formats an axis number compactly.
func fmtTick(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// SVG renders the chart.
func (c *Chart) SVG() []byte {
	p := newPlot(c)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", p.w, p.h, p.w, p.h)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", p.w, p.h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(c.Title))
	p.writeGrid(&b, c)
	for i, s := range c.Series {
		p.writeSeries(&b, i, s)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// The plot area's margins inside the chart.
const plotLeft, plotRight, plotTop, plotBottom = 72, 190, 40, 56

// plot is a chart's geometry: its size, the plot area and the ranges.
type plot struct {
	w, h                    int
	pw, ph                  float64
	logX                    bool
	xmin, xmax, ystep, ytop float64
}

// newPlot sizes the chart and finds the ranges of its series.
func newPlot(c *Chart) *plot {
	p := &plot{w: c.Width, h: c.Height, logX: c.LogX}
	if p.w == 0 {
		p.w = 760
	}
	if p.h == 0 {
		p.h = 420
	}
	p.pw, p.ph = float64(p.w-plotLeft-plotRight), float64(p.h-plotTop-plotBottom)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range c.Series {
		for i, x := range s.X {
			if c.LogX && x <= 0 {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			if i < len(s.Y) && !math.IsNaN(s.Y[i]) && !math.IsInf(s.Y[i], 0) {
				ymax = math.Max(ymax, s.Y[i])
			}
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	p.xmin, p.xmax = xmin, xmax
	p.ystep = niceStep(ymax, 5)
	p.ytop = math.Max(p.ystep, math.Ceil(ymax/p.ystep)*p.ystep)
	return p
}

func (p *plot) fx(x float64) float64 {
	if p.logX {
		return plotLeft + (math.Log10(x)-math.Log10(p.xmin))/(math.Log10(p.xmax)-math.Log10(p.xmin))*p.pw
	}
	return plotLeft + (x-p.xmin)/(p.xmax-p.xmin)*p.pw
}

func (p *plot) fy(y float64) float64 { return plotTop + p.ph - y/p.ytop*p.ph }

// xTicks are the chart's own ticks, or nice ones for the range.
func (p *plot) xTicks(c *Chart) []float64 {
	if len(c.XTicks) > 0 {
		return c.XTicks
	}
	var xt []float64
	if p.logX {
		for v := math.Pow(10, math.Floor(math.Log10(p.xmin))); v <= p.xmax*1.0001; v *= 10 {
			if v >= p.xmin*0.9999 {
				xt = append(xt, v)
			}
		}
		return xt
	}
	st := niceStep(p.xmax-p.xmin, 6)
	for x := math.Ceil(p.xmin/st) * st; x <= p.xmax*1.0001; x += st {
		xt = append(xt, x)
	}
	return xt
}

// writeGrid writes the grid, the ticks, the axes and their labels.
func (p *plot) writeGrid(b *bytes.Buffer, c *Chart) {
	left, top, pw, ph := plotLeft, plotTop, p.pw, p.ph
	for y := 0.0; y <= p.ytop*1.0001; y += p.ystep {
		py := p.fy(y)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, py, float64(left)+pw, py)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py+4, esc(fmtTick(y)))
	}
	for _, x := range p.xTicks(c) {
		if x < p.xmin*0.9999 || x > p.xmax*1.0001 || (p.logX && x <= 0) {
			continue
		}
		px := p.fx(x)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`+"\n", px, top, px, float64(top)+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, float64(top)+ph+18, esc(fmtTick(x)))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", left, top, left, float64(top)+ph)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, float64(top)+ph, float64(left)+pw, float64(top)+ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+pw/2, p.h-14, esc(c.XLabel))
	fmt.Fprintf(b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2, esc(c.YLabel))
}

// writeSeries writes series i: its line, its points (up to 40) and its
// legend entry.
func (p *plot) writeSeries(b *bytes.Buffer, i int, s Series) {
	col := s.Color
	if col == "" {
		col = palette[i%len(palette)]
	}
	dash := ""
	if s.Dash {
		dash = ` stroke-dasharray="6 4"`
	}
	drawn := func(j int, x float64) bool {
		return j < len(s.Y) && !(p.logX && x <= 0) && !math.IsNaN(s.Y[j]) && !math.IsInf(s.Y[j], 0)
	}
	var pts bytes.Buffer
	for j, x := range s.X {
		if drawn(j, x) {
			fmt.Fprintf(&pts, "%.1f,%.1f ", p.fx(x), p.fy(s.Y[j]))
		}
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", esc(col), dash, bytes.TrimSpace(pts.Bytes()))
	if len(s.X) <= 40 {
		for j, x := range s.X {
			if drawn(j, x) {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", p.fx(x), p.fy(s.Y[j]), esc(col))
			}
		}
	}
	ly := plotTop + 10 + i*20
	lx := p.w - plotRight + 16
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+24, ly, esc(col), dash)
	fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly+4, esc(s.Name))
}
