package certify

import (
	"reflect"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// Each runtime is prepared once however many cases share it, in a fixed
// order; each case then gets its runtime's dir, the requirements its build
// adds (once, after the adapter's own) and its skip reason.
func TestRuntimeOrderAndApply(t *testing.T) {
	a, b := &adapter.Manifest{Name: "b-adapter"}, &adapter.Manifest{Name: "a-adapter"}
	cases := []caseSpec{
		{adapter: a, rt: rtKey{"b-adapter", "musl"}, requires: []string{"bash"}},
		{adapter: a, rt: rtKey{"b-adapter", "glibc"}, requires: []string{"bash"}},
		{adapter: b, rt: rtKey{"a-adapter", ""}},
		{adapter: a, rt: rtKey{"b-adapter", "glibc"}, requires: []string{"bash", "libgcc"}},
	}
	manifests, order := runtimeOrder(cases)
	if want := []rtKey{{"a-adapter", ""}, {"b-adapter", "glibc"}, {"b-adapter", "musl"}}; !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if manifests["a-adapter"] != b || manifests["b-adapter"] != a || len(manifests) != 2 {
		t.Errorf("manifests %v, want each adapter by its name", manifests)
	}
	ready := map[rtKey]*adapter.Prepared{
		{"b-adapter", "glibc"}: {Dir: "/rt/glibc", Requires: []string{"glibc", "libgcc", "glibc"}},
		{"a-adapter", ""}:      {Dir: "/rt/a"},
	}
	skips := map[rtKey]string{{"b-adapter", "musl"}: "runtime not prepared: no musl build"}
	applyRuntimes(cases, ready, skips)
	type got struct {
		runtime, skip string
		requires      []string
	}
	want := []got{
		{"", "runtime not prepared: no musl build", []string{"bash"}},
		{"/rt/glibc", "", []string{"bash", "glibc", "libgcc"}},
		{"/rt/a", "", nil},
		{"/rt/glibc", "", []string{"bash", "libgcc", "glibc"}},
	}
	for i, c := range cases {
		if g := (got{c.runtime, c.skip, c.requires}); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("case %d: %+v, want %+v", i, g, want[i])
		}
	}
}
