//go:build sandproof_mutant && mutant_exitcodes

package mutant

// Active is the mutation this build carries.
const Active = ExitCodes
