//go:build sandproof_mutant && mutant_nostartcheck

package mutant

// Active is the mutation this build carries.
const Active = NoStartCheck
