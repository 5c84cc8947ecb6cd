//go:build !sandproof_mutant

package mutant

// Active is empty in every real build.
const Active Name = ""
