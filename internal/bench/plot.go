package bench

import (
	"fmt"
	"image/color"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// Plot draws the results of one engine as a PNG with two panels: median
// clone+ready time against data size per method (log scale), and the
// first-write series (median latency of write 1…10) at the largest size.
func Plot(results []*CloneResult, sizes []int64, path string) error {
	if len(results) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	methods := methodNames(results)
	ready, err := readyPlot(results, sizes, methods)
	if err != nil {
		return err
	}
	writes, err := writesPlot(results[len(results)-1], methods)
	if err != nil {
		return err
	}
	img := vgimg.New(12*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{ready, writes}}, tiles, dc)
	ready.Draw(canvases[0][0])
	writes.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// methodNames are every method of the results, sorted.
func methodNames(results []*CloneResult) []string {
	var methods []string
	seen := map[string]bool{}
	for _, r := range results {
		for _, m := range r.Methods {
			if !seen[m.Method] {
				seen[m.Method] = true
				methods = append(methods, m.Method)
			}
		}
	}
	sort.Strings(methods)
	return methods
}

// readyPlot is median clone+ready time against data size per method.
func readyPlot(results []*CloneResult, sizes []int64, methods []string) (*plot.Plot, error) {
	ready := plot.New()
	ready.Title.Text = fmt.Sprintf("%s: clone + ready", results[0].Engine)
	ready.X.Label.Text = "data size (MiB)"
	ready.Y.Label.Text = "ms (median)"
	ready.Y.Scale = plot.LogScale{}
	ready.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	ready.Legend.Top = true
	ready.Legend.Left = true
	for i, name := range methods {
		var pts plotter.XYs
		for j, r := range results {
			for _, m := range r.Methods {
				if m.Method == name && m.Ready.Median > 0 {
					pts = append(pts, plotter.XY{X: float64(sizes[j]) / (1 << 20), Y: m.Ready.Median})
				}
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, p, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color, p.Color = palette[i%len(palette)], palette[i%len(palette)]
		p.Shape = draw.CircleGlyph{}
		ready.Add(l, p)
		ready.Legend.Add(name, l, p)
	}
	return ready, nil
}

// writesPlot is the first-write series (median latency of write 1…10) of
// the largest size.
func writesPlot(last *CloneResult, methods []string) (*plot.Plot, error) {
	writes := plot.New()
	writes.Title.Text = fmt.Sprintf("%s %s: single-row writes after the clone", last.Engine, last.Size)
	writes.X.Label.Text = "write #"
	writes.Y.Label.Text = "ms (median over runs)"
	writes.Legend.Top = true
	for i, name := range methods {
		for _, m := range last.Methods {
			if m.Method != name || len(m.Samples) == 0 {
				continue
			}
			var pts plotter.XYs
			for k := 0; k < Writes; k++ {
				var xs []float64
				for _, s := range m.Samples {
					if k < len(s.WritesMs) {
						xs = append(xs, s.WritesMs[k])
					}
				}
				pts = append(pts, plotter.XY{X: float64(k + 1), Y: stat(xs).Median})
			}
			l, p, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			l.Color, p.Color = palette[i%len(palette)], palette[i%len(palette)]
			writes.Add(l, p)
			writes.Legend.Add(name, l, p)
		}
	}
	return writes, nil
}
