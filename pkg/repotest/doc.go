// Package repotest holds tests of the repository as a whole rather than of
// one package: conventions every package keeps, checked on the source tree.
package repotest
