//go:build sandproof_mutant && mutant_nolease

package mutant

// Active is the mutation this build carries.
const Active = NoLease
