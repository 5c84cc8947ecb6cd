package reports

import "slices"

// verdictGrid is a run's verdicts laid out for reading: a row per harness
// x image, grouped by harness, a column per scenario (one, "verdict",
// when every case is a challenge case). The harness groups that hold a
// failed case come first, then an unknown one, each group keeping the
// evidence's order otherwise. Image rows against harness x scenario
// columns grew sideways with every harness (54 columns and a page that
// scrolled at 1,500 px with nine); rows grow down instead, and the
// columns stay as many as the scenarios.
type verdictGrid struct {
	Columns []string
	Groups  []gridGroup
}

// gridGroup is one harness's rows, one per image of the run.
type gridGroup struct {
	Harness string
	Rows    []gridRow
	rank    int
}

// gridRow is one harness x image: its cells in Columns' order.
type gridRow struct {
	Image string
	Cells []Cell
}

// newVerdictGrid lays r's matrix out as a verdictGrid.
func newVerdictGrid(r *Run) verdictGrid {
	g := verdictGrid{Columns: r.Scenarios}
	if len(g.Columns) == 0 {
		g.Columns = []string{"verdict"}
	}
	for j, h := range r.Harnesses {
		grp := gridGroup{Harness: h, rank: htmlOrder("")}
		for i, img := range r.Images {
			c := r.Matrix[i][j]
			cells := c.Scenarios
			if r.Scenarios == nil {
				cells = []Cell{c}
			}
			for _, sc := range cells {
				if sc.Anchor != "" {
					grp.rank = min(grp.rank, htmlOrder(sc.Status))
				}
			}
			grp.Rows = append(grp.Rows, gridRow{Image: img, Cells: cells})
		}
		g.Groups = append(g.Groups, grp)
	}
	slices.SortStableFunc(g.Groups, func(a, b gridGroup) int { return a.rank - b.rank })
	return g
}
