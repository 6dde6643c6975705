// Data loaders against real files in a fresh temporary folder. The llmc order is checked against
// a literal re-implementation of llm.c's DataLoader (byte positions, header included).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "runtime/data/data.hpp"
#include "tests/test_util.hpp"

namespace fs = std::filesystem;
using zt::DataConfig;
using zt::DataError;
using zt::Split;

namespace {

using zt::test::TempDir;

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Shard s, token i is (s * 1000 + i) % 65536: every token says where it came from.
std::vector<uint16_t> shard_tokens(int s, int64_t count) {
  std::vector<uint16_t> t(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) t[size_t(i)] = uint16_t((s * 1000 + i) % 65536);
  return t;
}

std::vector<std::vector<uint16_t>> write_shards(const TempDir& dir, const std::vector<int64_t>& counts,
                                                const std::string& prefix = "train_") {
  std::vector<std::vector<uint16_t>> shards;
  for (size_t s = 0; s < counts.size(); ++s) {
    shards.push_back(shard_tokens(int(s), counts[s]));
    zt::write_llmc_shard(dir / (prefix + std::to_string(s) + ".bin"), shards.back());
  }
  return shards;
}

DataConfig llmc(const std::string& train, const std::string& val = "", bool shuffle = false) {
  DataConfig c;
  c.format = "llmc";
  c.train = train;
  c.val = val;
  c.shuffle = shuffle;
  return c;
}

DataConfig bytes(const std::string& train, const std::string& val = "", double frac = 0.1) {
  DataConfig c;
  c.format = "bytes";
  c.train = train;
  c.val = val;
  c.val_fraction = frac;
  return c;
}

// llm.c's dataloader.h (multi-process, before shuffling): positions in bytes with the header;
// after reading, advance by N*B*T tokens and move to the next shard if the next global batch
// would pass the end of the file.
struct LlmcReference {
  const std::vector<std::vector<uint16_t>>& shards;
  int64_t B, T, rank, N;
  size_t shard = 0;
  int64_t position;
  LlmcReference(const std::vector<std::vector<uint16_t>>& s, int64_t b, int64_t t, int64_t r, int64_t n)
      : shards(s), B(b), T(t), rank(r), N(n), position(1024 + r * b * t * 2) {}
  int64_t file_size() const { return 1024 + 2 * int64_t(shards[shard].size()); }
  void next(std::vector<int32_t>& in, std::vector<int32_t>& tg) {
    const size_t tok = size_t((position - 1024) / 2);
    for (size_t i = 0; i < size_t(B * T); ++i) {
      in[i] = shards[shard][tok + i];
      tg[i] = shards[shard][tok + i + 1];
    }
    position += N * B * T * 2;
    // llm.c's end check, made on the global slice (rank 0's position) so that the ranks stay in
    // step; llm.c itself checks each rank's own position.
    if (position - rank * B * T * 2 + (N * B * T + 1) * 2 > file_size()) {
      if (shards.size() > 1) shard = (shard + 1) % shards.size();
      position = 1024 + rank * B * T * 2;
    }
  }
  // Batches until the state first comes back to the start: one epoch.
  int64_t epoch_length() {
    std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
    int64_t n = 0;
    do {
      next(in, tg);
      ++n;
    } while (!(shard == 0 && position == 1024 + rank * B * T * 2));
    return n;
  }
};

struct Batch {
  std::vector<int32_t> in, tg;
  bool operator==(const Batch&) const = default;
};

Batch next_batch(zt::DataLoader& l, int64_t BT) {
  Batch b{std::vector<int32_t>(size_t(BT)), std::vector<int32_t>(size_t(BT))};
  l.next(b.in.data(), b.tg.data());
  return b;
}

std::vector<Batch> batches(zt::DataLoader& l, int64_t BT, int64_t n) {
  std::vector<Batch> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(next_batch(l, BT));
  return out;
}

// The message of the exception f throws (failing the test if it throws none or another type).
template <class E = DataError>
std::string error_of(const std::function<void()>& f) {
  return zt::test::error_of<E>(f);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Whole split of a bytes loader with B = T = 1, N = 1: batch k reads stream[k], stream[k+1], and an
// epoch is len-1 batches, so the inputs plus the last target rebuild the stream.
std::string stream_of(const DataConfig& cfg, Split split) {
  auto l = zt::make_loader(cfg, split, 1, 1, 0, 1, 0);
  std::string s;
  int32_t in = 0, tg = 0;
  for (int64_t i = 0; i < l->batches_per_epoch(); ++i) {
    l->next(&in, &tg);
    s.push_back(char(in));
  }
  s.push_back(char(tg));
  CHECK(int64_t(s.size()) == l->num_tokens());
  return s;
}

}  // namespace

TEST_CASE("llmc order matches llm.c for world size 1 and 3") {
  struct Case {
    int64_t B, T, N;
    std::vector<int64_t> counts;
  };
  // Sizes just at, above and between multiples of N*B*T+1, plus a shard whose tokens wrap 65536.
  const Case cases[] = {{4, 16, 1, {200, 65, 70000, 129}},
                        {2, 8, 3, {49, 100, 145, 97, 50}},
                        {1, 4, 3, {13, 25, 26, 37, 40}}};
  for (const Case& c : cases) {
    TempDir dir;
    const auto shards = write_shards(dir, c.counts);
    for (int64_t r = 0; r < c.N; ++r) {
      CAPTURE(c.N);
      CAPTURE(r);
      auto l = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, int(c.B), int(c.T), int(r),
                               int(c.N), 1);
      LlmcReference ref(shards, c.B, c.T, r, c.N);
      const int64_t epoch = LlmcReference(shards, c.B, c.T, r, c.N).epoch_length();
      CHECK(l->batches_per_epoch() == epoch);
      CHECK(l->vocab_limit() == 65536);
      int64_t total = 0;
      for (int64_t n : c.counts) total += n;
      CHECK(l->num_tokens() == total);
      Batch want{std::vector<int32_t>(size_t(c.B * c.T)), std::vector<int32_t>(size_t(c.B * c.T))};
      for (int64_t i = 0; i < 2 * epoch + 7; ++i) {  // across every shard boundary and two wraps
        ref.next(want.in, want.tg);
        const Batch got = next_batch(*l, c.B * c.T);
        REQUIRE(got == want);
      }
    }
  }
}

TEST_CASE("llmc: ranks 0..N-1 read one contiguous global batch, targets shifted by one") {
  TempDir dir;
  const int64_t B = 2, T = 5, N = 3, BT = B * T;
  const auto shards = write_shards(dir, {100, 80});
  std::vector<int32_t> all;
  int32_t last_target = -1;
  for (int r = 0; r < N; ++r) {
    auto l = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, B, T, r, N, 1);
    const Batch b = next_batch(*l, BT);
    for (int64_t i = 0; i + 1 < BT; ++i) CHECK(b.tg[size_t(i)] == b.in[size_t(i + 1)]);
    all.insert(all.end(), b.in.begin(), b.in.end());
    last_target = b.tg.back();
  }
  all.push_back(last_target);
  CHECK(all == std::vector<int32_t>(shards[0].begin(), shards[0].begin() + N * BT + 1));
}

TEST_CASE("llmc: all ranks leave a shard together") {
  // 97 = 2*N*B*T + 1: global slices 0 and 1 fit. llm.c's per-rank end check would let rank 2 leave
  // after slice 0; here every rank reads both, so the ranks keep reading one global slice.
  TempDir dir;
  const auto shards = write_shards(dir, {97});
  auto r0 = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, 2, 8, 0, 3, 1);
  auto r2 = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, 2, 8, 2, 3, 1);
  CHECK(r0->batches_per_epoch() == 2);
  CHECK(r2->batches_per_epoch() == 2);
  next_batch(*r2, 16);
  const Batch second = next_batch(*r2, 16);
  CHECK(second.tg.back() == shards[0][96]);  // the last token of the shard, read by the last rank
}

TEST_CASE("llmc: val split, missing val, reset") {
  TempDir dir;
  write_shards(dir, {60, 70});
  const auto val = write_shards(dir, {40}, "val_");
  const std::string msg = error_of<zt::ConfigError>(
      [&] { zt::make_loader(llmc(dir / "train_*.bin"), Split::val, 2, 4, 0, 1, 1); });
  CHECK(msg == "config: data.val: no validation data given");

  auto v = zt::make_loader(llmc(dir / "train_*.bin", dir / "val_*.bin", true), Split::val, 2, 4, 0, 1, 1);
  CHECK(v->num_tokens() == 40);
  const Batch first = next_batch(*v, 8);
  CHECK(first.in == std::vector<int32_t>(val[0].begin(), val[0].begin() + 8));  // in order

  auto t = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, 2, 4, 0, 1, 1);
  const auto a = batches(*t, 8, 20);
  t->reset();
  CHECK(batches(*t, 8, 20) == a);
}

TEST_CASE("llmc errors name the file and the numbers") {
  TempDir dir;
  const int B = 2, T = 4, N = 3;  // one global batch: 25 tokens
  auto load = [&](const std::string& pattern) {
    return error_of([&] { zt::make_loader(llmc(pattern), Split::train, B, T, 0, N, 1); });
  };
  const std::string shard = dir / "s.bin";
  auto patch_int = [&](int index, int32_t value) {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(index * 4);
    f.write(reinterpret_cast<const char*>(&value), 4);  // the host is little endian, like the format
  };

  SUBCASE("no match") {
    CHECK(load(dir / "none_*.bin") == "data: no file matches '" + (dir / "none_*.bin") + "'");
  }
  SUBCASE("wrong magic") {
    zt::write_llmc_shard(shard, shard_tokens(0, 30));
    patch_int(0, 12345);
    const std::string m = load(shard);
    CHECK(contains(m, shard));
    CHECK(contains(m, "magic 12345"));
    CHECK(contains(m, "expected 20240520"));
  }
  SUBCASE("wrong version") {
    zt::write_llmc_shard(shard, shard_tokens(0, 30));
    patch_int(1, 7);
    const std::string m = load(shard);
    CHECK(contains(m, shard));
    CHECK(contains(m, "unsupported version 7 for magic 20240520, expected 1"));
  }
  SUBCASE("truncated shard") {
    zt::write_llmc_shard(shard, shard_tokens(0, 30));
    fs::resize_file(shard, 1024 + 2 * 30 - 3);
    const std::string m = load(shard);
    CHECK(contains(m, shard));
    CHECK(contains(m, std::to_string(1024 + 60) + " bytes"));
    CHECK(contains(m, std::to_string(1024 + 57) + " bytes"));
    CHECK(contains(m, "truncated shard"));
  }
  SUBCASE("truncated header") {
    write_text(shard, std::string(100, 'x'));
    const std::string m = load(shard);
    CHECK(contains(m, shard));
    CHECK(contains(m, "truncated header"));
  }
  SUBCASE("shard too small for one global batch") {
    zt::write_llmc_shard(dir / "a.bin", shard_tokens(0, 30));
    zt::write_llmc_shard(dir / "b.bin", shard_tokens(1, 24));
    const std::string m = load(dir / "*.bin");
    CHECK(contains(m, dir / "b.bin"));
    CHECK(contains(m, "24 tokens"));
    CHECK(contains(m, "25 tokens"));
    CHECK(contains(m, "too small for one global batch"));
  }
  SUBCASE("write to an impossible path") {
    const std::string bad = dir / "no/such/folder/x.bin";
    CHECK(contains(error_of([&] { zt::write_llmc_shard(bad, {1, 2}); }), bad));
  }
}

TEST_CASE("llmc: a token beyond the model's vocabulary names the file and its position") {
  TempDir dir;
  std::vector<uint16_t> tokens(400, 7);
  tokens[123] = 300;
  zt::write_llmc_shard(dir / "train_0.bin", tokens);
  // Rank 1 of 2, B 2, T 16: batch g reads tokens [64g + 32, 64g + 64], so token 123 is in batch 1.
  auto loader = zt::make_loader(llmc(dir / "train_*.bin"), Split::train, 2, 16, 1, 2, 0);
  std::vector<int32_t> in(32), tg(32);
  loader->limit_tokens(256);
  loader->next(in.data(), tg.data());
  CHECK_THROWS_WITH_AS(loader->next(in.data(), tg.data()),
                       ("data: " + (dir / "train_0.bin") + ": token 123 (byte 1270) is 300, outside the model's vocabulary "
                        "[0, 256) (model.vocab_size)").c_str(),
                       DataError);
  loader->reset();
  loader->limit_tokens(301);
  loader->next(in.data(), tg.data());
  loader->next(in.data(), tg.data());
}

TEST_CASE("bytes: folder walk, symlink duplicates once, list order, vocab") {
  TempDir dir;
  write_text(dir / "corpus/a.txt", "alpha ");
  write_text(dir / "corpus/sub/b.txt", "beta ");
  write_text(dir / "corpus/sub/c.txt", "gamma ");
  fs::create_symlink("sub/b.txt", dir / "corpus/z_link");  // same real file as sub/b.txt
  fs::create_directory_symlink("..", dir / "corpus/sub/up");  // a cycle must not loop forever
  write_text(dir / "extra.txt", "delta!");

  SUBCASE("folder: sorted by path, each real file once") {
    CHECK(stream_of(bytes(dir / "corpus", "x"), Split::train) == "alpha beta gamma ");
  }
  SUBCASE("list order is kept, globs sorted, duplicates across items dropped") {
    const std::string list = dir / "extra.txt" + ":" + dir / "corpus/sub/*.txt" + ":" + dir / "corpus";
    CHECK(stream_of(bytes(list, "x"), Split::train) == "delta!beta gamma alpha ");
  }
  SUBCASE("vocab and counts") {
    auto l = zt::make_loader(bytes(dir / "corpus", "x"), Split::train, 1, 4, 0, 1, 0);
    CHECK(l->vocab_limit() == 256);
    CHECK(l->num_tokens() == 17);
  }
  SUBCASE("a file that shrinks behind the loader is named by the read that finds its end") {
    auto l = zt::make_loader(bytes(dir / "corpus", "x"), Split::train, 1, 4, 0, 1, 0);
    fs::resize_file(dir / "corpus/sub/b.txt", 2);  // "alpha |be" : the batch at 4 needs b.txt's byte 2
    int32_t in[4], tg[4];
    l->next(in, tg);
    CHECK(contains(error_of([&] { l->next(in, tg); }), dir / "corpus/sub/b.txt"));
  }
  SUBCASE("missing entry, broken symlink, empty entry") {
    CHECK(contains(error_of([&] { stream_of(bytes(dir / "nope.txt", "x"), Split::train); }),
                   "no file matches '" + (dir / "nope.txt") + "'"));
    fs::create_symlink("missing", dir / "corpus/broken");
    CHECK(contains(error_of([&] { stream_of(bytes(dir / "corpus", "x"), Split::train); }),
                   dir / "corpus/broken"));
    CHECK(contains(error_of([&] { stream_of(bytes(dir / "extra.txt::" + dir / "extra.txt", "x"), Split::train); }),
                   "empty entry"));
  }
  if (::geteuid() != 0) {  // root reads everything, so this only means something for other users
    SUBCASE("unreadable file") {
      ::chmod((dir / "extra.txt").c_str(), 0);
      CHECK(contains(error_of([&] { stream_of(bytes(dir / "extra.txt", "x"), Split::train); }),
                     dir / "extra.txt"));
    }
  }
}

TEST_CASE("bytes: val_fraction split and explicit val list") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(char('a' + (i * 7) % 26));
  write_text(dir / "all.txt", text);
  write_text(dir / "held.txt", "held out text");

  SUBCASE("tail split: disjoint, together the whole stream") {
    const std::string train = stream_of(bytes(dir / "all.txt", "", 0.1), Split::train);
    const std::string val = stream_of(bytes(dir / "all.txt", "", 0.1), Split::val);
    CHECK(train.size() == 900);
    CHECK(val.size() == 100);
    CHECK(train + val == text);
  }
  SUBCASE("explicit val list") {
    CHECK(stream_of(bytes(dir / "all.txt", dir / "held.txt"), Split::train) == text);
    CHECK(stream_of(bytes(dir / "all.txt", dir / "held.txt"), Split::val) == "held out text");
  }
  SUBCASE("order and wrap-around follow the llmc rule on one stream") {
    // 30 bytes, B*T = 4, N = 2: rank 1 reads 4..8, 12..16, 20..24, then wraps (28+9 > 30).
    write_text(dir / "small.txt", text.substr(0, 30));
    auto l = zt::make_loader(bytes(dir / "small.txt", dir / "held.txt"), Split::train, 1, 4, 1, 2, 0);
    CHECK(l->batches_per_epoch() == 3);
    for (int epoch = 0; epoch < 2; ++epoch)
      for (int start : {4, 12, 20}) {
        const Batch b = next_batch(*l, 4);
        CHECK(b.in == std::vector<int32_t>(text.begin() + start, text.begin() + start + 4));
        CHECK(b.tg == std::vector<int32_t>(text.begin() + start + 1, text.begin() + start + 5));
      }
  }
  SUBCASE("too small split, empty stream") {
    write_text(dir / "ten.txt", "0123456789");
    write_text(dir / "empty.txt", "");
    // B*T = 4, N = 2: 9 tokens needed; train has 9, the val tail has 1.
    CHECK_NOTHROW(zt::make_loader(bytes(dir / "ten.txt", "", 0.1), Split::train, 1, 4, 0, 2, 0));
    const std::string m = error_of(
        [&] { zt::make_loader(bytes(dir / "ten.txt", "", 0.1), Split::val, 1, 4, 0, 2, 0); });
    CHECK(contains(m, dir / "ten.txt"));
    CHECK(contains(m, "has 1 tokens"));
    CHECK(contains(m, "9 tokens"));
    CHECK(contains(error_of([&] { zt::make_loader(bytes(dir / "empty.txt"), Split::train, 1, 4, 0, 2, 0); }),
                   dir / "empty.txt"));
  }
}

TEST_CASE("shuffle: a permutation per epoch, ranks in lockstep and disjoint, deterministic") {
  TempDir dir;
  const int B = 2, T = 3, N = 3, BT = B * T, NBT = N * BT;
  const std::vector<int64_t> counts = {19, 40, 77, 100, 55};  // tokens (s, i) encode as s*1000+i
  write_shards(dir, counts);
  const DataConfig cfg = llmc(dir / "train_*.bin", "", true);
  // Every (shard, global slice) that fits for all ranks: rank 0's llm.c count per shard.
  std::set<std::pair<int, int64_t>> all_slices;
  for (size_t s = 0; s < counts.size(); ++s)
    for (int64_t g = 0; g < std::max<int64_t>(1, (counts[s] - 1) / NBT); ++g) all_slices.insert({int(s), g});

  auto slices_of = [&](const std::vector<Batch>& bs, int rank) {
    std::vector<std::pair<int, int64_t>> out;
    for (const Batch& b : bs) {
      const int s = b.in[0] / 1000, i = b.in[0] % 1000;
      REQUIRE((i - rank * BT) % NBT == 0);  // this rank's own B*T slice inside a global slice
      for (int k = 0; k < BT; ++k) REQUIRE(b.tg[size_t(k)] == b.in[size_t(k)] + 1);
      out.push_back({s, (i - rank * BT) / NBT});
    }
    return out;
  };

  std::vector<std::vector<std::pair<int, int64_t>>> per_rank;
  for (int r = 0; r < N; ++r) {
    auto l = zt::make_loader(cfg, Split::train, B, T, r, N, 42);
    CHECK(l->batches_per_epoch() == int64_t(all_slices.size()));
    const int64_t E = l->batches_per_epoch();
    const auto epoch0 = slices_of(batches(*l, BT, E), r);
    const auto epoch1 = slices_of(batches(*l, BT, E), r);
    // Each epoch visits every slice exactly once, in a different order each epoch.
    CHECK(std::set(epoch0.begin(), epoch0.end()) == all_slices);
    CHECK(epoch0.size() == all_slices.size());
    CHECK(std::set(epoch1.begin(), epoch1.end()) == all_slices);
    CHECK(epoch0 != epoch1);
    // reset() restarts at epoch 0.
    l->reset();
    CHECK(slices_of(batches(*l, BT, E), r) == epoch0);
    per_rank.push_back(epoch0);
  }
  // All ranks visit the same global slices at each step, so their B*T pieces are disjoint.
  CHECK(per_rank[1] == per_rank[0]);
  CHECK(per_rank[2] == per_rank[0]);

  auto seq = [&](uint64_t seed, bool shuffle) {
    auto l = zt::make_loader(llmc(dir / "train_*.bin", "", shuffle), Split::train, B, T, 0, N, seed);
    return batches(*l, BT, 2 * l->batches_per_epoch());
  };
  CHECK(seq(42, true) == seq(42, true));
  CHECK(seq(42, true) != seq(43, true));
  CHECK(seq(42, true) != seq(42, false));
  // The shard order is permuted too: some epoch does not start in shard 0 for some seed.
  bool moved = false;
  for (uint64_t seed = 0; seed < 20 && !moved; ++seed) moved = seq(seed, true)[0].in[0] / 1000 != 0;
  CHECK(moved);
}

TEST_CASE("shuffle: bytes stream visits each slice once per epoch") {
  TempDir dir;
  std::string text(200, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char(i);
  write_text(dir / "t.bin", text);
  DataConfig cfg = bytes(dir / "t.bin", dir / "t.bin");
  cfg.shuffle = true;
  auto l = zt::make_loader(cfg, Split::train, 2, 4, 1, 2, 7);  // N*B*T = 16
  CHECK(l->batches_per_epoch() == 12);  // (200-1)/16
  std::vector<int> starts;
  for (const Batch& b : batches(*l, 8, 12)) starts.push_back(b.in[0]);
  std::vector<int> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> want;
  for (int g = 0; g < 12; ++g) want.push_back(g * 16 + 8);
  CHECK(sorted == want);
  CHECK(starts != want);
  // Validation ignores shuffle.
  auto v = zt::make_loader(cfg, Split::val, 2, 4, 1, 2, 7);
  CHECK(next_batch(*v, 8).in[0] == 8);
  CHECK(next_batch(*v, 8).in[0] == 24);
}
