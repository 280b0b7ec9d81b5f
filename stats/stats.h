// The statistics of the experiments (docs/rl_stats.md §7–§9): one include for the whole ponder::stats library.
#pragma once
#include "stats/descriptive.h"
#include "stats/rliable.h"
#include "stats/hierarchical.h"
#include "stats/special.h"
#include "stats/tests.h"
