#include "runtime/agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "comm/process_group.hpp"
#include "runtime/config_keys.hpp"
#include "offload/checksum.hpp"

namespace zt {

namespace {

using nlohmann::json;

// A value longer than this is compared whole (through its digest) but named by its start.
constexpr size_t kShownBytes = 256;

// "rank 3", "ranks 0-2, 5".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

// The values of setting `key` on every rank, grouped: "2 on ranks 0-1, 3 on rank 2".
std::string values_text(Communicator& comm, const std::string& value) {
  std::string shown = value.size() < kShownBytes ? value : value.substr(0, kShownBytes - 4) + "...";
  std::vector<uint64_t> words(kShownBytes / sizeof(uint64_t), 0);
  std::memcpy(words.data(), shown.data(), shown.size());  // zero-terminated by the padding
  const std::vector<uint64_t> all = all_gather_words(comm, words);
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // in the order first seen
  for (int r = 0; r < comm.size(); ++r) {
    const char* text = reinterpret_cast<const char*>(all.data() + static_cast<size_t>(r) * words.size());
    const std::string v(text, strnlen(text, kShownBytes));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
    if (it == groups.end()) groups.push_back({v, {r}});
    else it->second.push_back(r);
  }
  std::string s;
  for (const auto& [v, ranks] : groups) s += (s.empty() ? "" : ", ") + v + " on " + ranks_text(ranks);
  return s;
}

}  // namespace

std::vector<uint64_t> all_gather_words(Communicator& comm, const std::vector<uint64_t>& mine) {
  const auto count = static_cast<int64_t>(mine.size());
  const Tensor in = Tensor::empty({2 * count}, DType::i32, MemCategory::communication);
  const Tensor out = Tensor::empty({2 * count * comm.size()}, DType::i32, MemCategory::communication);
  std::memcpy(in.raw(), mine.data(), in.nbytes());
  comm.all_gather(in, out);
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(comm.size()));
  std::memcpy(all.data(), out.raw(), out.nbytes());
  return all;
}

// Every setting's row not marked per_rank ([Note: one declaration per key] in runtime/config_keys.hpp).
std::vector<std::pair<std::string, std::string>> shared_settings(const Config& c) {
  std::vector<std::pair<std::string, std::string>> s;
  for (const KeySpec& k : config_table())
    if (k.role == KeyRole::value && !k.per_rank) s.emplace_back(k.key, key_value(k, c).dump());
  return s;
}

void agree_on_settings(const Config& cfg, Communicator& comm) {
  const int n = comm.size();
  if (n == 1) return;
  const auto settings = shared_settings(cfg);
  std::vector<uint64_t> digests;
  for (const auto& [key, value] : settings) {
    const std::string both = key + '\0' + value;
    digests.push_back(checksum(both.data(), both.size()));
  }
  const uint64_t whole = checksum(digests.data(), digests.size() * sizeof(uint64_t));

  const std::vector<uint64_t> heads = all_gather_words(comm, {digests.size(), whole});
  bool same = true;
  for (size_t r = 1; r < static_cast<size_t>(n); ++r) same = same && heads[2 * r] == heads[0] && heads[2 * r + 1] == heads[1];
  if (same) return;
  // Every rank ends here with the same finding: rank 0 says it ([Note: failing together]).
  mark_failing_together(comm.rank() == 0);
  for (size_t r = 0; r < static_cast<size_t>(n); ++r)
    if (heads[2 * r] != digests.size())
      throw ConfigError("config: the ranks disagree on which settings a run has (" + std::to_string(digests.size()) +
                        " on rank " + std::to_string(comm.rank()) + ", " + std::to_string(heads[2 * r]) + " on rank " +
                        std::to_string(r) + "): they run different ztrain builds");

  const std::vector<uint64_t> each = all_gather_words(comm, digests);
  size_t k = 0;
  auto differs = [&](size_t i) {
    for (int r = 1; r < n; ++r)
      if (each[static_cast<size_t>(r) * digests.size() + i] != each[i]) return true;
    return false;
  };
  while (k + 1 < digests.size() && !differs(k)) ++k;
  throw ConfigError("config: " + settings[k].first + ": the ranks disagree: " + values_text(comm, settings[k].second) +
                    " (every rank must run the same configuration)");
}

}  // namespace zt
