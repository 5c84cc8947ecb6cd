//go:build sandproof_mutant && mutant_claimrace

package mutant

// Active is the mutation this build carries.
const Active = ClaimRace
