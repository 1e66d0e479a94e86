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
	w, h := c.Width, c.Height
	if w == 0 {
		w = 760
	}
	if h == 0 {
		h = 420
	}
	const left, right, top, bottom = 72, 190, 40, 56
	pw, ph := float64(w-left-right), float64(h-top-bottom)

	// Ranges.
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
	ystep := niceStep(ymax, 5)
	ytop := math.Max(ystep, math.Ceil(ymax/ystep)*ystep)
	fx := func(x float64) float64 {
		if c.LogX {
			return left + (math.Log10(x)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))*pw
		}
		return left + (x-xmin)/(xmax-xmin)*pw
	}
	fy := func(y float64) float64 { return top + ph - y/ytop*ph }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))

	// Y grid and ticks.
	for y := 0.0; y <= ytop*1.0001; y += ystep {
		py := fy(y)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, py, left+pw, py)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py+4, esc(fmtTick(y)))
	}
	// X ticks.
	xt := c.XTicks
	if len(xt) == 0 {
		if c.LogX {
			for p := math.Pow(10, math.Floor(math.Log10(xmin))); p <= xmax*1.0001; p *= 10 {
				if p >= xmin*0.9999 {
					xt = append(xt, p)
				}
			}
		} else {
			st := niceStep(xmax-xmin, 6)
			for x := math.Ceil(xmin/st) * st; x <= xmax*1.0001; x += st {
				xt = append(xt, x)
			}
		}
	}
	for _, x := range xt {
		if x < xmin*0.9999 || x > xmax*1.0001 || (c.LogX && x <= 0) {
			continue
		}
		px := fx(x)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`+"\n", px, top, px, top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, top+ph+18, esc(fmtTick(x)))
	}
	// Axes and labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", left+pw/2, h-14, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", top+ph/2, top+ph/2, esc(c.YLabel))

	// Series and legend.
	for i, s := range c.Series {
		col := s.Color
		if col == "" {
			col = palette[i%len(palette)]
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts bytes.Buffer
		for j, x := range s.X {
			if j >= len(s.Y) || (c.LogX && x <= 0) || math.IsNaN(s.Y[j]) || math.IsInf(s.Y[j], 0) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", fx(x), fy(s.Y[j]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", esc(col), dash, bytes.TrimSpace(pts.Bytes()))
		if len(s.X) <= 40 {
			for j, x := range s.X {
				if j >= len(s.Y) || (c.LogX && x <= 0) || math.IsNaN(s.Y[j]) || math.IsInf(s.Y[j], 0) {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", fx(x), fy(s.Y[j]), esc(col))
			}
		}
		ly := top + 10 + i*20
		lx := w - right + 16
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+24, ly, esc(col), dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
