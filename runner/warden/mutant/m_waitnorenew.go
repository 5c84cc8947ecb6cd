//go:build sandproof_mutant && mutant_waitnorenew

package mutant

// Active is the mutation this build carries.
const Active = WaitNoRenew
