//go:build sandproof_mutant && mutant_groupreuse

package mutant

// Active is the mutation this build carries.
const Active = GroupReuse
