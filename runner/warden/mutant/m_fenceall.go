//go:build sandproof_mutant && mutant_fenceall

package mutant

// Active is the mutation this build carries.
const Active = FenceAll
