// Package docs holds the project's documentation; its only code is the
// test that every citation of the contract in the repository resolves to a
// clause of docs/contract.md, so a reader never has to look outside the
// repository for a clause a spec, a check or a report names.
package docs
