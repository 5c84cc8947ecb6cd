//go:build sandproof_mutant && mutant_nonjsonstop

package mutant

// Active is the mutation this build carries.
const Active = NonJSONStop
