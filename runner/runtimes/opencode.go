package runtimes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// OpenCodePackage is the npm wrapper package; the binary comes from one
// platform package (opencode-linux-x64, ...-baseline, ...-musl), which its
// postinstall would pick. Prepare picks it itself from the target.
const OpenCodePackage = "opencode-ai"

// OpenCodePin pins one platform build.
type OpenCodePin struct {
	Version string
	// Integrity is the wrapper package's, PlatformIntegrity the platform
	// package's (both sha512, as the registry publishes them).
	Integrity         string
	PlatformIntegrity string
	// BinarySHA256 is the sha256 of bin/opencode ("" = not pinned).
	BinarySHA256 string
	// TreeSHA256 is the TreeSum of the prepared tree ("" = not pinned).
	TreeSHA256 string
}

// OpenCodePins maps Target.String() to its pin: the newest version the
// registry served for that platform package when pinned (1.18.33 for
// x64 glibc; the musl and arm64 packages lagged behind).
var OpenCodePins = map[string]OpenCodePin{
	"linux-x64": {Version: "1.18.33",
		Integrity:         "sha512-58P1ffLRXiAY4QeoABqUjqf6DEzm1ihpovvn9Ad+oOLbLiwK/rf88wruT9IATJ7AtNjmi8iA7pC8tN4o5y799Q==",
		PlatformIntegrity: "sha512-q/t/3p2CTxOT9y2kvjesb/LZab2+1eqlhhWA02Be6mjTtmYtNBcBsrI5yDo4Fw7ZSPBW2oyMIGMNRqiKQjiAWw==",
		BinarySHA256:      "0abbb7c32ab0294c0a7bfa2705f9ff0df5dce5ab721d1f00cccfe393f2a11427",
		TreeSHA256:        "692bc5753ab215aa12d7542eed267959c73edf1f32a6a9c00d98d1792aab6ae0"},
	"linux-x64-baseline": {Version: "1.18.33",
		Integrity:         "sha512-58P1ffLRXiAY4QeoABqUjqf6DEzm1ihpovvn9Ad+oOLbLiwK/rf88wruT9IATJ7AtNjmi8iA7pC8tN4o5y799Q==",
		PlatformIntegrity: "sha512-1KQGBiiDDeL/VHHbHkOvvFo8Jr97WT5+C1tear+p7IcDTnXgVHXqIjU4O4jM4mHQzykTP2i884FCnW5LDa+zCA=="},
	"linux-x64-musl": {Version: "1.18.32",
		Integrity:         "sha512-SCrZWdq44y/EoH2+fE4HLcXS+DzpVqHPzmXk3p2RrufYy8LWvpfhRhKtijb5ktvx8r94ScqToqwHxR0BwS65OQ==",
		PlatformIntegrity: "sha512-ktS7x5Ms+sVMCAb2oRpPKGk10isRjHkwBz6ordNOlx0epx6JQPsTydzJmpLBSdsiFAkfmZoBiYayKDXXU+rwXA=="},
	"linux-x64-baseline-musl": {Version: "1.18.32",
		Integrity:         "sha512-SCrZWdq44y/EoH2+fE4HLcXS+DzpVqHPzmXk3p2RrufYy8LWvpfhRhKtijb5ktvx8r94ScqToqwHxR0BwS65OQ==",
		PlatformIntegrity: "sha512-HGa9YBUBdc+qAyC9U8zXUht5qbTufOABOfSwmhukmzl9uMtuGoUovCzilwxytH0mTr/prUT/LAqWcXXoPXjRoA=="},
	"linux-arm64": {Version: "1.18.18",
		Integrity:         "sha512-J+5HFq8tf+wPBBpBpMPSNjSytF2/EkNWYfFZh4si1d9auFbQriqDyqZv+vFUsLWERfdMU32Eajwuiq3rKBvZLQ==",
		PlatformIntegrity: "sha512-e8D3g0qJEIzawEg2+ygW3vkZjAYL2ssyAx4GbihjwXwZFvlZZy5zRWWzdz5KLBoHSTl0FB73vNtnNeXONyHpVQ=="},
}

// OpenCode returns the spec of OpenCode's runtime for target: the platform
// package's binary as bin/opencode (a Bun-compiled ELF; the glibc build
// needs only libc, libm, libdl and libpthread), the two package.json files
// under lib/ for provenance.
func OpenCode(target Target) (Spec, error) {
	if err := target.valid(); err != nil {
		return Spec{Name: "opencode"}, err
	}
	pin, ok := OpenCodePins[target.String()]
	if !ok {
		return Spec{Name: "opencode", Target: target}, fmt.Errorf("%w: opencode %s", ErrNotPinned, target)
	}
	platform := "opencode-" + target.String()
	s := Spec{
		Name: "opencode", Version: pin.Version, Target: target,
		Package: OpenCodePackage, Integrity: pin.Integrity, PackagesSHA256: pin.TreeSHA256,
		Entry:       []string{"bin/opencode"},
		VersionArgs: []string{"--version"},
		VersionEnv: []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_CLAUDE_CODE=1"},
	}
	s.Stage = func(ctx context.Context, dir string, info map[string]any) error {
		dl, err := os.MkdirTemp(dir, ".download-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dl)
		wrapper, err := npmPack(ctx, dl, OpenCodePackage, pin.Version, pin.Integrity)
		if err != nil {
			return err
		}
		plat, err := npmPack(ctx, dl, platform, pin.Version, pin.PlatformIntegrity)
		if err != nil {
			return err
		}
		wdir, pdir := filepath.Join(dl, "wrapper"), filepath.Join(dl, "platform")
		if err := extractPackage(wrapper, wdir); err != nil {
			return err
		}
		if err := extractPackage(plat, pdir); err != nil {
			return err
		}
		for _, d := range []string{"bin", "lib/" + OpenCodePackage, "lib/" + platform} {
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
				return err
			}
		}
		if err := os.Rename(filepath.Join(wdir, "package.json"), filepath.Join(dir, "lib", OpenCodePackage, "package.json")); err != nil {
			return fmt.Errorf("%s has no package.json: %w", OpenCodePackage, err)
		}
		if err := os.Rename(filepath.Join(pdir, "package.json"), filepath.Join(dir, "lib", platform, "package.json")); err != nil {
			return fmt.Errorf("%s has no package.json: %w", platform, err)
		}
		bin := filepath.Join(dir, "bin", "opencode")
		if err := os.Rename(filepath.Join(pdir, "bin", "opencode"), bin); err != nil {
			return fmt.Errorf("%s has no bin/opencode: %w", platform, err)
		}
		if err := os.Chmod(bin, 0o755); err != nil {
			return err
		}
		sum, _, err := hashFile(bin)
		if err != nil {
			return err
		}
		if pin.BinarySHA256 != "" && sum != pin.BinarySHA256 {
			return fmt.Errorf("%w: %s bin/opencode is sha256:%s, pinned sha256:%s", ErrChecksum, platform, sum, pin.BinarySHA256)
		}
		info["platform_package"], info["platform_integrity"], info["binary_sha256"] = platform+"@"+pin.Version, pin.PlatformIntegrity, sum
		return nil
	}
	return s, nil
}
