package witness

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseRecord(t *testing.T) {
	data := `{"kind":"spawned","role":"setsid","pid":11,"start_time":110,"uid":0,"has_marker":false}
{"kind":"proc","role":"harness","pid":10,"start_time":100,"comm":"adversary","uid":0,"marker":"L","has_marker":true,"marker_first":true}
{"kind":"proc","role":"setsid","pid":11,"start_time":110,"comm":"adversary","uid":0,"has_marker":true}
{"kind":"zombie","pid":12,"uid":0,"has_marker":false}
{"kind":"exit","pid":13,"uid":0,"has_marker":false,"code":3}
{"kind":"ready","pid":10,"uid":0,"has_marker":false}
{"kind":"proc","role":"late","pid":14,"sta`
	r, err := ParseRecord([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready || len(r.Procs) != 2 || len(r.Spawned) != 1 || len(r.Zombies) != 1 || r.Zombies[0] != 12 {
		t.Fatalf("record %+v", r)
	}
	if e, ok := r.Exits[13]; !ok || e.Code == nil || *e.Code != 3 {
		t.Errorf("exit of 13: %+v", r.Exits)
	}
	h, err := r.Harness()
	if err != nil || h.ID() != (ID{10, 100}) || h.Marker != "L" || !h.MarkerFirst {
		t.Errorf("harness %+v, %v", h, err)
	}
	if ids := r.IDs(); len(ids) != 2 || ids[0] != (ID{10, 100}) || ids[1] != (ID{11, 110}) {
		t.Errorf("IDs = %v, want each recorded process once", ids)
	}
	if got := r.Role("setsid"); len(got) != 1 || got[0].PID != 11 {
		t.Errorf("Role(setsid) = %+v", got)
	}
}

func TestParseRecordRejects(t *testing.T) {
	for _, data := range []string{
		"{\"kind\":\"proc\",\"pid\":\"x\"}\n",
		"{\"kind\":\"procs\",\"pid\":1}\n",
		"not json\n",
	} {
		if r, err := ParseRecord([]byte(data)); err == nil {
			t.Errorf("ParseRecord(%q) = %+v, want an error", data, r)
		}
	}
}

func TestReadRecordFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadRecord(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("ReadRecord of a missing file: %v, want not-exist", err)
	}
	if ids := RecordedIDs(filepath.Join(dir, "none")); ids != nil {
		t.Errorf("RecordedIDs of a missing file = %v", ids)
	}
	path := filepath.Join(dir, "record")
	if err := os.WriteFile(path, []byte(`{"kind":"proc","role":"harness","pid":10,"start_time":100,"uid":0,"has_marker":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ids := RecordedIDs(path); len(ids) != 1 || ids[0] != (ID{10, 100}) {
		t.Errorf("RecordedIDs = %v", ids)
	}
}
