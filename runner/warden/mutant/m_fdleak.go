//go:build sandproof_mutant && mutant_fdleak

package mutant

// Active is the mutation this build carries.
const Active = FDLeak
