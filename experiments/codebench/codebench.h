// The harness of `ponder codebench`: runs benchmark programs one sandboxed process each, several at a time, and
// says why each one that failed did (a failed test, a missing module, a limit, ...).
#pragma once
#include <string>
#include <vector>

#include "experiments/codebench/sandbox.h"

namespace ponder::codebench {

struct Outcome {
  sandbox::Result result;
  // passed, failed-test, error, syntax-error, missing-module, memory, timeout, cpu-limit, signal, sandbox-error
  std::string category;
  std::string reason;  // one line; empty when passed
};

// Reads a finished program's status and stderr (Python tracebacks, unittest reports).
Outcome classify(const sandbox::Result& r);

// Runs each program in its own sandbox, `jobs` at a time, in order of the list. Long runs show a progress line with
// an ETA on stderr, labelled `label`. Throws when the sandbox itself fails to start.
std::vector<Outcome> run_programs(const sandbox::Sandbox& box, const std::vector<std::string>& programs,
                                  const sandbox::Limits& limits, int jobs, const std::string& label);

// `text` from an untrusted program made safe for a terminal: control characters other than newline and tab (ESC
// and the C1 controls among them, which start terminal escape sequences) are written as \xHH.
std::string printable(const std::string& text);

// The unbiased pass@k estimate for one problem with c of n samples correct: 1 - C(n-c, k) / C(n, k).
double pass_at_k(int n, int c, int k);

}  // namespace ponder::codebench
