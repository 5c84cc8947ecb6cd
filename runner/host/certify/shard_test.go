package certify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
)

func matrixOf(imgs []string, adapters []string) Matrix {
	var is []images.Image
	for _, n := range imgs {
		is = append(is, images.Image{Name: n, Ref: "sandproof/" + n + ":1"})
	}
	var ms []*adapter.Manifest
	for _, n := range adapters {
		ms = append(ms, &adapter.Manifest{Name: n, SHA256: "sha-" + n})
	}
	return NewMatrix(is, ms, nil)
}

// Every case is in exactly one shard, for every shard count, and the
// slices do not depend on the order of the flags.
func TestShardsPartitionTheMatrix(t *testing.T) {
	m := matrixOf([]string{"debian-12", "alpine-class", "old-python"}, []string{"pi", "opencode", "codex", "claude-code"})
	swapped := matrixOf([]string{"old-python", "debian-12", "alpine-class"}, []string{"codex", "claude-code", "pi", "opencode"})
	if m.SHA256 != swapped.SHA256 {
		t.Fatalf("the matrix digest depends on the flags' order: %s vs %s", m.SHA256, swapped.SHA256)
	}
	for n := 1; n <= 13; n++ {
		sizes := map[int]int{}
		for _, c := range m.Cases {
			in := 0
			for i := 1; i <= n; i++ {
				if m.Has(Shard{i, n}, c.ID) {
					in++
					sizes[i]++
				}
				if m.Has(Shard{i, n}, c.ID) != swapped.Has(Shard{i, n}, c.ID) {
					t.Errorf("%s in shard %d/%d depends on the flags' order", c.ID, i, n)
				}
			}
			if in != 1 {
				t.Errorf("%s is in %d of %d shards", c.ID, in, n)
			}
		}
		for i := 1; i <= n; i++ {
			if want := len(m.Cases) / n; sizes[i] < want || sizes[i] > want+1 {
				t.Errorf("shard %d/%d holds %d of %d cases", i, n, sizes[i], len(m.Cases))
			}
		}
	}
	if !m.Has(Shard{}, m.Cases[0].ID) || m.Has(Shard{1, 2}, "nope/none") {
		t.Error("the zero shard holds every case; no shard holds a case outside the matrix")
	}
	// Another adapter digest is another matrix.
	other := matrixOf([]string{"debian-12"}, []string{"pi"})
	other2 := NewMatrix([]images.Image{{Name: "debian-12", Ref: "sandproof/debian-12:1"}}, []*adapter.Manifest{{Name: "pi", SHA256: "changed"}}, nil)
	if other.SHA256 == other2.SHA256 {
		t.Error("a changed adapter digest kept the matrix digest")
	}
}

func TestParseShard(t *testing.T) {
	for _, ok := range []string{"1/1", "1/2", "2/2", "7/10"} {
		s, err := ParseShard(ok)
		if err != nil || s.String() != ok {
			t.Errorf("ParseShard(%q) = %v, %v", ok, s, err)
		}
	}
	for _, bad := range []string{"", "0/2", "3/2", "1/0", "a/b", "1", "1/2/3", "-1/2", "1/-2"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		} else if want := fmt.Sprintf("%q", bad); !strings.Contains(err.Error(), want) {
			t.Errorf("ParseShard(%q): %v does not quote the value", bad, err)
		}
	}
}
