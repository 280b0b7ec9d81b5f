// The PONDER_* environment variables, checked once at start-up: a typo in a name or a value is an error before any
// work starts, not a silent default (or an error twenty steps into training, at the first kernel that reads it).
#pragma once

namespace ponder::cli {

// Throws naming the variable and what it may be, for an unknown PONDER_* name or a value its reader would reject.
void check_ponder_environment();

}  // namespace ponder::cli
