//go:build sandproof_mutant && mutant_deadlineextends

package mutant

// Active is the mutation this build carries.
const Active = DeadlineExtends
