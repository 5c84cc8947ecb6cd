//go:build sandproof_mutant && mutant_supfdleak

package mutant

// Active is the mutation this build carries.
const Active = SupFDLeak
