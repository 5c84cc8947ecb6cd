//go:build sandproof_mutant && mutant_relpath

package mutant

// Active is the mutation this build carries.
const Active = RelPath
