package session

// xdgDefaults are the XDG base-directory variables with their defaults
// under HOME (the XDG Base Directory specification's), in the order the
// owner's markers are listed.
var xdgDefaults = []struct{ env, rel string }{
	{"XDG_CONFIG_HOME", "/.config"},
	{"XDG_DATA_HOME", "/.local/share"},
	{"XDG_CACHE_HOME", "/.cache"},
	{"XDG_STATE_HOME", "/.local/state"},
}

// ownerMarkerDir is the directory the owner keeps in each XDG dir
// (contract §7.1): the session must leave it alone, and the diff allows it.
const ownerMarkerDir = "/sandproof-owner"

// XDGDefaults maps each XDG base-directory variable to its default under
// home.
func XDGDefaults(home string) map[string]string {
	m := make(map[string]string, len(xdgDefaults))
	for _, x := range xdgDefaults {
		m[x.env] = home + x.rel
	}
	return m
}

// XDGDirs returns home's four XDG base directories: config, data, cache,
// state.
func XDGDirs(home string) []string {
	out := make([]string, 0, len(xdgDefaults))
	for _, x := range xdgDefaults {
		out = append(out, home+x.rel)
	}
	return out
}

// OwnerMarkerDirs returns the owner's directory in each of home's XDG
// dirs: XDG/sandproof-owner.
func OwnerMarkerDirs(home string) []string {
	out := XDGDirs(home)
	for i := range out {
		out[i] += ownerMarkerDir
	}
	return out
}

// OwnerMarkers returns the owner's marker file in each of home's XDG dirs:
// XDG/sandproof-owner/marker.
func OwnerMarkers(home string) []string {
	out := OwnerMarkerDirs(home)
	for i := range out {
		out[i] += "/marker"
	}
	return out
}
