#include "experiments/process/ranks.h"

#include <algorithm>
#include <cstdint>

#include "util/sha256.h"
#include "tensor/dist.h"

namespace ponder::cli {

void check_ranks_agree(const std::string& label, const RankFields& fields) {
  if (dist::size() == 1) return;
  const std::vector<uint64_t> counts = dist::allgather(std::vector<uint64_t>{fields.size()});
  for (int r = 1; r < dist::size(); ++r)
    if (counts[size_t(r)] != counts[0])  // another build, or a bug: the digests below would not line up
      throw dist::SharedError(label + ": rank " + std::to_string(r) + " compares " + std::to_string(counts[size_t(r)]) +
                              " fields of the run, rank 0 " + std::to_string(counts[0]) + "; every rank must run the "
                              "same ponder");
  std::vector<uint64_t> mine;
  for (const auto& [name, value] : fields) mine.push_back(std::stoull(util::sha256_hex(value).substr(0, 16), nullptr, 16));
  const std::vector<uint64_t> all = dist::allgather(mine);
  const size_t n = fields.size();
  for (int r = 1; r < dist::size(); ++r)
    for (size_t f = 0; f < n; ++f)
      if (all[size_t(r) * n + f] != all[f]) {
        std::string mine_text = fields[f].second.substr(0, 80);
        std::replace(mine_text.begin(), mine_text.end(), '\n', ' ');
        throw dist::SharedError(label + ": rank " + std::to_string(r) + " disagrees with rank 0 on the " +
                                fields[f].first + "; every rank must run the same command on the same files (rank " +
                                std::to_string(dist::rank()) + " has: " + mine_text + ")");
      }
}

}  // namespace ponder::cli
