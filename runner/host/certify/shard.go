package certify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
)

// Shard is one slice of a run's image x adapter matrix (`--shard i/N`),
// the pattern Playwright's --shard and merge-reports made familiar: N
// machines each run one slice against their own engine, and `sandproof
// report merge` joins the run directories into one run.
type Shard struct {
	// Index is 1-based; Total is the number of shards. The zero Shard is
	// the whole matrix.
	Index, Total int
}

// IsZero reports whether s is the whole matrix.
func (s Shard) IsZero() bool { return s.Total == 0 }

func (s Shard) String() string {
	if s.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Total)
}

// ParseShard reads "i/N" with 1 <= i <= N.
func ParseShard(v string) (Shard, error) {
	i, n, err := reports.ParseShard(v)
	if err != nil {
		return Shard{}, fmt.Errorf("bad value %q (%v, e.g. 1/2)", v, err)
	}
	return Shard{Index: i, Total: n}, nil
}

// Matrix is the whole run's case set, the same on every shard: each case's
// id with its adapter manifest's digest and its image's reference, sorted
// by case id, and a digest of that list. Shards of one run must agree on
// the digest; `report merge` refuses shards that do not.
type Matrix struct {
	Cases  []MatrixCase
	SHA256 string
}

// MatrixCase is one cell of the matrix.
type MatrixCase struct {
	ID, AdapterSHA256, ImageRef string
}

// NewMatrix builds the matrix of imgs x ms x each adapter's scenarios
// (scenariosFor, of the scenarios named; none named is each adapter's
// default). The order of the flags does not matter: the cases are sorted
// by id.
func NewMatrix(imgs []images.Image, ms []*adapter.Manifest, scenarios []string) Matrix {
	var m Matrix
	for _, img := range imgs {
		for _, a := range ms {
			for _, sc := range scenariosFor(a, scenarios) {
				m.Cases = append(m.Cases, MatrixCase{ID: CaseID(img.Name, a.Name, sc.Name), AdapterSHA256: a.SHA256, ImageRef: img.Ref})
			}
		}
	}
	slices.SortFunc(m.Cases, func(a, b MatrixCase) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	for _, c := range m.Cases {
		fmt.Fprintf(h, "%s\t%s\t%s\n", c.ID, c.AdapterSHA256, c.ImageRef)
	}
	m.SHA256 = hex.EncodeToString(h.Sum(nil))
	return m
}

// Has reports whether shard s runs the case with id: the k-th case of the
// sorted matrix belongs to shard k mod N + 1, so every case is in exactly
// one shard and the shards' sizes differ by at most one.
func (m Matrix) Has(s Shard, id string) bool {
	if s.IsZero() {
		return true
	}
	k, ok := slices.BinarySearchFunc(m.Cases, id, func(c MatrixCase, id string) int { return strings.Compare(c.ID, id) })
	return ok && k%s.Total == s.Index-1
}
