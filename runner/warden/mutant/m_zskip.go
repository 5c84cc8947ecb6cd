//go:build sandproof_mutant && mutant_zskip

package mutant

// Active is the mutation this build carries.
const Active = ZSkip
