// The positive control's corpus: generated text in which extra inner steps provably matter for some units and not
// for others. Every document draws its own alphabet of 4 distinct lowercase letters; every line is one 16-byte unit
// (a TTT mini-batch of the byte tokenizer):
//   noise  "." + 14 letters drawn uniformly from all 26 + "\n"      unpredictable whatever the model knows
//   text   15 letters drawn uniformly from the document's alphabet + "\n"
// Lines come in runs: 1 to 4 noise lines, then 1 to 3 text lines. A model that knows a document's alphabet pays
// 2 bits per text letter; one that does not pays up to log2(26) = 4.7. Nothing before the document tells the
// alphabet, so it can only be learned while reading, from the text lines: inner steps on text units write what
// later text units need, while steps on noise units write uniform letters over it. An oracle that spends its budget
// on text units and skips noise must therefore beat uniform at equal compute, if the pipeline measures what it
// claims to; and a heuristic that spends where the loss is high spends on noise, the wrong place.
// (Tried first and dropped: a copy task — a random string defined once and recalled on the next line — which the
// small TTT layers never learned to retrieve, so every K >= 1 tied on it; and constant filler lines instead of noise,
// whose effect was too small to separate from zero.)
#pragma once
#include <cstdint>

#include "data/corpus.h"

namespace ponder::data {

constexpr int64_t kPlantedUnit = 16;  // bytes per line: the unit the corpus is built from

// `docs` documents of `lines` lines each (lines ≥ 8), from the seed; names "planted 1" …, in order. `unit` is the
// line's length in bytes (≥ 4): 16 for the TTT layers' mini-batch; 64 ("planted64") makes each line one chunk of the
// fast-weight path (ponder adapt), whose positive control it is. There a base that sees no context (attention over
// a window of one token) can learn the alphabet only through the fast weights.
Corpus make_planted(uint64_t seed, int64_t docs, int64_t lines, int64_t unit = kPlantedUnit);

}  // namespace ponder::data
