//go:build sandproof_mutant && mutant_nohold

package mutant

// Active is the mutation this build carries.
const Active = NoHold
