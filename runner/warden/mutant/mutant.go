// Package mutant lets `make mutants` build variants of warden that each break
// one guarantee, so the suite can prove it catches them. Active names the
// mutation compiled in. It is a constant, set only by build tags
// (sandproof_mutant plus mutant_<name>): the shipped build has Active == ""
// and the compiler removes every mutated branch, so no switch reaches the
// binary users run. The catalogue of mutants, with the contract clause whose
// specs must kill each, is in conformance/mutants.
package mutant

// Is reports whether the named mutation is compiled in.
func Is(name Name) bool { return Active == name }
