package python

import (
	"strings"
	"testing"
)

var cp313 = Platform{Major: 3, Minor: 13, Machine: "x86_64", GlibcMinor: 41}

func TestWheelScore(t *testing.T) {
	for file, fits := range map[string]bool{
		"pydantic_core-2.33.2-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": true,
		"cryptography-45.0.0-cp311-abi3-manylinux_2_34_x86_64.whl":                        true,
		"six-1.17.0-py2.py3-none-any.whl":                                                 true,
		"x-1.0-py312-none-any.whl":                                                        true,
		"x-1.0-py314-none-any.whl":                                                        false,
		"x-1.0-cp312-cp312-manylinux_2_17_x86_64.whl":                                     false,
		"x-1.0-cp313-cp313-manylinux_2_42_x86_64.whl":                                     false, // newer glibc than the tree's
		"x-1.0-cp313-cp313-musllinux_1_2_x86_64.whl":                                      false,
		"x-1.0-cp313-cp313-linux_x86_64.whl":                                              false,
		"x-1.0-cp313-cp313-manylinux_2_17_aarch64.whl":                                    false,
		"x-1.0-cp313-cp313-win_amd64.whl":                                                 false,
		"x-1.0-cp313-cp313t-manylinux_2_17_x86_64.whl":                                    false, // free-threaded
		"x-1.0-cp313-cp313-manylinux1_x86_64.whl":                                         true,
	} {
		w, err := ParseWheelName(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Score(cp313) > 0; got != fits {
			t.Errorf("%s: fits = %v, want %v", file, got, fits)
		}
	}
	abi, _ := ParseWheelName("x-1.0-cp39-abi3-manylinux_2_17_x86_64.whl")
	own, _ := ParseWheelName("x-1.0-cp313-cp313-manylinux_2_17_x86_64.whl")
	pure, _ := ParseWheelName("x-1.0-py3-none-any.whl")
	if !(own.Score(cp313) > abi.Score(cp313) && abi.Score(cp313) > pure.Score(cp313)) {
		t.Errorf("scores own %d abi3 %d pure %d: want own > abi3 > pure", own.Score(cp313), abi.Score(cp313), pure.Score(cp313))
	}
	if _, err := ParseWheelName("x-1.0.tar.gz"); err == nil {
		t.Error("an sdist parsed as a wheel")
	}
}

func file(name, sha string) File {
	f := File{Filename: name, PackageType: "bdist_wheel", URL: "https://files.example/" + name}
	if strings.HasSuffix(name, ".tar.gz") {
		f.PackageType = "sdist"
	}
	f.Hashes.SHA256 = sha
	return f
}

func TestChooseTakesOnlyAPinnedFittingWheel(t *testing.T) {
	r := Requirement{Name: "x", Version: "1.0", Hashes: []string{hashA}, Line: 4}
	pure, own := file("x-1.0-py3-none-any.whl", hashA), file("x-1.0-cp313-cp313-manylinux_2_17_x86_64.whl", hashB)
	got, _, err := Choose(r, []File{own, pure}, cp313)
	if err != nil || got.Filename != pure.Filename {
		t.Errorf("Choose = %s, %v: want the pinned wheel, not the better unpinned one", got.Filename, err)
	}
	for _, tc := range []struct {
		files []File
		want  string
	}{
		{[]File{file("x-1.0.tar.gz", hashA)}, "no wheel on the index, only a source distribution"},
		{[]File{file("x-1.0-cp313-cp313-win_amd64.whl", hashA)}, "no wheel for cp313 manylinux_2_41_x86_64 (the index has x-1.0-cp313-cp313-win_amd64.whl)"},
		{[]File{own}, "the lock's sha256 match none of its wheels"},
	} {
		_, _, err := Choose(r, tc.files, cp313)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "lock line 4") {
			t.Errorf("Choose(%v) = %v, want %q", tc.files[0].Filename, err, tc.want)
		}
	}
}

func TestWheelEntryKeepsOnlySitePackages(t *testing.T) {
	for in, want := range map[string]string{
		"pkg/__init__.py":                "pkg/__init__.py",
		"x-1.0.dist-info/METADATA":       "x-1.0.dist-info/METADATA",
		"x-1.0.data/purelib/pkg/a.py":    "pkg/a.py",
		"x-1.0.data/platlib/pkg/_c.so":   "pkg/_c.so",
		"x-1.0.data/scripts/x":           "",
		"x-1.0.data/data/share/x":        "",
		"x-1.0.data/headers/x.h":         "",
		"x-1.0.data/purelib":             "",
		"x-1.0.data/purelib/../../etc/x": "../../etc/x", // refused by artifact's name rule
	} {
		if got := wheelEntry(in); got != want {
			t.Errorf("wheelEntry(%q) = %q, want %q", in, got, want)
		}
	}
}
