//go:build sandproof_mutant && mutant_noparentcheck

package mutant

// Active is the mutation this build carries.
const Active = NoParentCheck
