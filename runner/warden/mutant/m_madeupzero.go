//go:build sandproof_mutant && mutant_madeupzero

package mutant

// Active is the mutation this build carries.
const Active = MadeUpZero
