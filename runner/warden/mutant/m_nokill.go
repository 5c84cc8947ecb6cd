//go:build sandproof_mutant && mutant_nokill

package mutant

// Active is the mutation this build carries.
const Active = NoKill
