//go:build sandproof_mutant && mutant_quadraticcr

package mutant

// Active is the mutation this build carries.
const Active = QuadraticCR
