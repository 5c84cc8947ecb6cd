//go:build sandproof_mutant && mutant_callergroup

package mutant

// Active is the mutation this build carries.
const Active = CallerGroup
