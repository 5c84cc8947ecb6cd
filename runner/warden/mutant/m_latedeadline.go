//go:build sandproof_mutant && mutant_latedeadline

package mutant

// Active is the mutation this build carries.
const Active = LateDeadline
