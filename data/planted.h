// The positive control's corpus: generated text in which extra inner steps provably matter for some units and not
// for others. Every line is one 16-byte unit (a TTT mini-batch of the byte tokenizer):
//   filler      "..............." + "\n"                 predictable from the previous byte alone
//   definition  "#" KKK "=" VVVVVVVVVV "\n"              a fresh random key and value (lowercase letters)
//   recall      "@" KKK "=" VVVVVVVVVV "\n"              the same key and value again, on the very next line
// Between definition–recall pairs come 2 to 6 filler lines. A recall's value can only be predicted from what the
// layer stored while reading its definition, so the steps spent on definition units are what decides the recall
// loss, while filler loss does not depend on the steps at all. An oracle that spends its budget on definitions and
// skips filler must therefore beat uniform at equal compute, if the pipeline measures what it claims to.
#pragma once
#include <cstdint>

#include "data/corpus.h"

namespace ponder::data {

constexpr int64_t kPlantedUnit = 16;  // bytes per line: the unit the corpus is built from

// `docs` documents of `lines` lines each (lines ≥ 8), from the seed; names "planted 1" …, in order.
Corpus make_planted(uint64_t seed, int64_t docs, int64_t lines);

}  // namespace ponder::data
