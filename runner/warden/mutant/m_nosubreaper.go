//go:build sandproof_mutant && mutant_nosubreaper

package mutant

// Active is the mutation this build carries.
const Active = NoSubreaper
