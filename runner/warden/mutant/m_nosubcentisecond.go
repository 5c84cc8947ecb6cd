//go:build sandproof_mutant && mutant_nosubcentisecond

package mutant

// Active is the mutation this build carries.
const Active = NoSubCentisecond
