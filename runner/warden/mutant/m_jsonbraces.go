//go:build sandproof_mutant && mutant_jsonbraces

package mutant

// Active is the mutation this build carries.
const Active = JSONBraces
