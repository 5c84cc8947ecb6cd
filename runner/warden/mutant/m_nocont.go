//go:build sandproof_mutant && mutant_nocont

package mutant

// Active is the mutation this build carries.
const Active = NoCont
