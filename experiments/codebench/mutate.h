// Deterministic semantic mutations of Python solutions, to check that a benchmark's tests (and the harness running
// them) reject wrong code: a mutant that still passes "survived", which means the mutation was too weak to matter
// or the tests do not look at what it changed.
//
// Operators, each applied at every site it has in the solution (one site alone is often dead code for the tests,
// such as a guard for an input they never give):
//   return-none        return X      -> return None
//   negate-condition   if/elif/while C:  -> ... not (C):
//   negate-comparison  <  <=  >  >=  ==  !=   -> their negations
//   int-plus-one       an integer literal n  -> n + 1
// The automatic order tries them in that order and uses the first that has a site. return-none comes first because
// every benchmark checks what functions return. Measured on the canonical solutions (survivors / mutants):
//   return-none         HumanEval 0/164   MBPP 0/974    ClassEval 0/98
//   negate-condition              0/103        16/469             0/81
//   negate-comparison             0/112        15/449             1/67
//   int-plus-one                 10/128        46/608             1/76
// The other operators' survivors are mostly equivalent mutants (a branch the tests never reach, a swap that never
// happens). negate-condition serves code that returns nothing (a class that only changes its state).
//
// Sites are found by a small Python tokenizer, so operators inside strings and comments are left alone.
#pragma once
#include <string>
#include <vector>

namespace ponder::codebench {

const std::vector<std::string>& mutation_operators();  // the automatic order

struct Mutant {
  std::string op;      // the operator used; empty when none has a site (the source is unchanged)
  int sites = 0;       // how many places it changed
  std::string source;  // the mutated solution
};

// The first operator of `order` that has a site in `source`, applied at all of its sites. Throws naming an unknown
// operator.
Mutant mutate(const std::string& source, const std::vector<std::string>& order);

}  // namespace ponder::codebench
