//go:build sandproof_mutant && mutant_noreap

package mutant

// Active is the mutation this build carries.
const Active = NoReap
