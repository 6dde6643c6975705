// The TensorFile readers (files/tensor_file.hpp) against files written by each format's own
// library. tests/ref/make_tensor_files.py writes them at test time (one generator per format)
// together with the values a reader must produce (its <set>.txt manifests, <set>.expected/NAME.f32).
// Each format's cases sit in their own namespace and section and make their own files.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "files/gguf_file.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace tensor_files_test {

// Runs `make_tensor_files.py <format> <dir>`; the interpreter and script come from the meson test.
inline void make_reference(const std::string& format, const test::TempDir& dir) {
  const char* py = std::getenv("ZT_PYTHON");
  const char* ref = std::getenv("ZT_TENSOR_FILES_REF");
  REQUIRE_MESSAGE((py && ref), "ZT_PYTHON and ZT_TENSOR_FILES_REF must be set (meson test sets them)");
  const test::Run r = test::run(std::string(py) + " " + ref + " " + format + " " + dir.path.string());
  REQUIRE_MESSAGE(r.status == 0, "make_tensor_files.py " << format << " failed:\n" << r.output);
}

// The message of the std::runtime_error that f() throws ("" if it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tensor_files_test

// ---- GGUF (files/gguf_file.hpp), against the gguf Python package ---------------------------------
namespace gguf_test {

using tensor_files_test::error_of;

// The files of `make_tensor_files.py gguf`, in a directory of their own.
struct Files {
  test::TempDir dir;
  Files() { tensor_files_test::make_reference("gguf", dir); }
  std::string operator/(const std::string& name) const { return dir / name; }
  // gguf.quants.dequantize's values of tensor `name` in file set `set` (the manifest's EXPECTED).
  std::vector<float> expected(const std::string& set, const std::string& name) const {
    return test::read_floats(dir / (set + ".expected/" + name + ".f32"));
  }
};

struct Expected {
  const char* name;
  Shape shape;
  const char* dtype;
};
// good.gguf's tensors, in its order (make_tensor_files.py's gguf_tensors), shapes outermost first;
// q8_0_big's 32000 blocks are more than the reader stages at once (1 MiB).
const std::vector<Expected> kGood = {
    {"f32_1d", {7}, "F32"},       {"f32_2d", {3, 5}, "F32"},    {"f32_3d", {2, 3, 4}, "F32"},
    {"f16_2d", {4, 6}, "F16"},    {"bf16_2d", {3, 7}, "BF16"},  {"q8_0_1d", {64}, "Q8_0"},
    {"q8_0_2d", {3, 64}, "Q8_0"}, {"q4_0_1d", {96}, "Q4_0"},    {"q4_0_2d", {5, 32}, "Q4_0"},
    {"q4_1_1d", {32}, "Q4_1"},    {"q4_1_2d", {3, 96}, "Q4_1"}, {"q8_0_big", {500, 2048}, "Q8_0"},
};

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (const int64_t d : s) n *= d;
  return n;
}

// got against gguf.quants.dequantize's values for elements [begin, begin + got.size()), bit for
// bit: every product q * d is exact in f32 (files/gguf_file.cpp), so even Q4_1's q * d + m
// rounds once in numpy and in any build, fused multiply-add or not.
void check_values(const std::string& dtype, const std::vector<float>& got, const std::vector<float>& want,
                  int64_t begin) {
  REQUIRE(begin + static_cast<int64_t>(got.size()) <= static_cast<int64_t>(want.size()));
  int wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = want[static_cast<size_t>(begin) + i];
    if (got[i] != w && ++wrong <= 3)
      FAIL_CHECK(dtype << " element " << begin + static_cast<int64_t>(i) << ": got " << got[i] << ", want " << w);
  }
  CHECK(wrong == 0);
}

std::vector<float> read(const GgufFile& f, const std::string& name, int64_t begin, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.f);
  f.read_f32(name, begin, n, out.data());
  return out;
}

}  // namespace gguf_test

TEST_CASE("gguf: entries' names, shapes and types, in the file's order") {
  using namespace gguf_test;
  Files files;
  const auto f = GgufFile::open(files / "good.gguf");
  CHECK(f->version() == 3);
  CHECK(f->alignment() == 32);
  CHECK(f->data_offset() % 32 == 0);
  REQUIRE(f->entries().size() == kGood.size());
  for (size_t i = 0; i < kGood.size(); ++i) {
    const TensorFileEntry& e = f->entries()[i];
    CAPTURE(kGood[i].name);
    CHECK(e.name == kGood[i].name);
    CHECK(e.shape == kGood[i].shape);
    CHECK(e.dtype == kGood[i].dtype);
    CHECK(e.file == files / "good.gguf");
    CHECK(f->find(kGood[i].name) == &e);
  }
  CHECK(f->find("nope") == nullptr);
}

TEST_CASE("gguf: metadata of every value type, arrays of strings, numbers and arrays") {
  using namespace gguf_test;
  Files files;
  const auto f = GgufFile::open(files / "good.gguf");
  CHECK(f->meta_string("general.architecture") == "llama");
  CHECK(f->meta_string("general.name") == "ztrain test");
  CHECK(f->meta_int("llama.block_count") == 2);
  CHECK(f->meta("llama.block_count")->type == GgufType::UINT32);
  CHECK(f->meta_float("llama.rope.freq_base") == 10000.0);
  CHECK(f->meta_int("test.u8") == 200);
  CHECK(f->meta_int("test.i8") == -100);
  CHECK(f->meta_int("test.u16") == 60000);
  CHECK(f->meta_int("test.i16") == -30000);
  CHECK(f->meta_int("test.u32") == 4000000000LL);
  CHECK(f->meta_int("test.i32") == -2000000000LL);
  CHECK(f->meta_int("test.i64") == -(int64_t{1} << 40));
  CHECK(std::get<uint64_t>(f->meta("test.u64")->value) == (uint64_t{1} << 63) + 5);
  CHECK(f->meta_float("test.f32") == 0.125);
  CHECK(f->meta_float("test.f64") == 3.141592653589793);
  CHECK(f->meta_float("test.i8") == -100.0);  // integers widen to a number
  CHECK(f->meta_bool("test.bool") == true);
  CHECK(f->meta("absent") == nullptr);
  CHECK(!f->meta_int("absent"));
  CHECK(!f->meta_strings("absent"));

  CHECK(f->meta_strings("tokenizer.ggml.tokens") ==
        std::vector<std::string>{"<s>", "hello", "w\xc3\xb6rld", "", " space"});
  CHECK(f->meta_strings("tokenizer.ggml.merges") == std::vector<std::string>{"h e", "l l"});
  CHECK(f->meta_ints("tokenizer.ggml.token_type") == std::vector<int64_t>{1, 2, 3, -4});
  CHECK(f->meta_floats("tokenizer.ggml.scores") == std::vector<double>{0.5, -1.25});
  const GgufValue::Array* nested = f->meta_array("test.nested");
  REQUIRE(nested);
  CHECK(f->meta("test.nested")->array_type == GgufType::ARRAY);
  REQUIRE(nested->size() == 2);
  CHECK((*nested)[0].as_array()->size() == 2);
  CHECK((*nested)[1].as_array()->at(2).as_int() == 5);

  // Every key is kept, in the file's order (general.architecture is the writer's first).
  CHECK(f->metadata().size() == 20);
  CHECK(f->metadata().front().first == "general.architecture");
  CHECK(f->metadata().back().first == "test.nested");

  // A key of another type is a broken file, named with the key; a UINT64 past int64 is refused.
  const std::string wrong = error_of([&] { (void)f->meta_int("general.name"); });
  CHECK(wrong.find("good.gguf") != std::string::npos);
  CHECK(wrong.find("'general.name' is STRING") != std::string::npos);
  CHECK(error_of([&] { (void)f->meta_strings("tokenizer.ggml.scores"); }).find("ARRAY of FLOAT32") !=
        std::string::npos);
  CHECK(error_of([&] { (void)f->meta_int("test.u64"); }).find("does not fit int64") != std::string::npos);
}

TEST_CASE("gguf: read_f32 of whole tensors matches gguf.quants.dequantize") {
  using namespace gguf_test;
  Files files;
  const auto f = GgufFile::open(files / "good.gguf");
  for (const Expected& e : kGood) {
    CAPTURE(e.name);
    const std::vector<float> want = files.expected("good", e.name);
    REQUIRE(static_cast<int64_t>(want.size()) == numel(e.shape));
    check_values(e.dtype, read(*f, e.name, 0, numel(e.shape)), want, 0);
  }
}

TEST_CASE("gguf: read_f32 of ranges that start and end inside blocks") {
  using namespace gguf_test;
  Files files;
  const auto f = GgufFile::open(files / "good.gguf");
  for (const Expected& e : kGood) {
    const std::vector<float> want = files.expected("good", e.name);
    const int64_t total = numel(e.shape);
    // One element, a block's middle to the next block's middle, a row's end into the next row,
    // across the reader's 1 MiB staging of Q8_0 blocks (30840 of 34 bytes), the last element,
    // and everything but the first and last.
    const std::vector<std::pair<int64_t, int64_t>> ranges = {
        {0, 1},         {5, 1},         {13, 37},       {31, 2},   {total / 3, total / 2},
        {986850, 2000}, {total - 1, 1}, {1, total - 2}, {total, 0}};
    for (const auto& range : ranges) {
      // Plain locals: clang 14 cannot capture structured bindings in CAPTURE's lambda.
      const int64_t begin = range.first, n = range.second;
      if (begin + n > total || n < 0) continue;
      CAPTURE(e.name);
      CAPTURE(begin);
      CAPTURE(n);
      check_values(e.dtype, read(*f, e.name, begin, n), want, begin);
    }
  }
}

TEST_CASE("gguf: version 2, and a 64-byte general.alignment, read the same values") {
  using namespace gguf_test;
  Files files;
  const auto v2 = GgufFile::open(files / "v2.gguf");
  CHECK(v2->version() == 2);
  const auto a64 = GgufFile::open(files / "aligned64.gguf");
  CHECK(a64->alignment() == 64);
  CHECK(a64->meta_int("general.alignment") == 64);
  CHECK(a64->data_offset() % 64 == 0);
  CHECK(a64->entries().size() == 6);
  for (const auto& [file, set] : {std::pair{v2.get(), "good"}, std::pair{a64.get(), "aligned64"}}) {
    const GgufFile* f = file;  // a plain local: clang 14 cannot capture structured bindings
    for (const TensorFileEntry& e : f->entries()) {
      CAPTURE(f->path());
      CAPTURE(e.name);
      const std::vector<float> want = files.expected(set, e.name);
      check_values(e.dtype, read(*f, e.name, 0, numel(e.shape)), want, 0);
    }
  }
}

TEST_CASE("gguf: a type ztrain does not dequantize is listed, and read_f32 refuses it by name") {
  using namespace gguf_test;
  Files files;
  const std::string path = files / "q6_k.gguf";
  const auto f = GgufFile::open(path);
  REQUIRE(f->entries().size() == 2);
  CHECK(f->entries()[0].name == "blk.0.ffn_down.weight");
  CHECK(f->entries()[0].dtype == "Q6_K");
  CHECK(f->entries()[0].shape == Shape{2, 256});
  CHECK(error_of([&] { read(*f, "blk.0.ffn_down.weight", 0, 4); }) ==
        "gguf '" + path +
            "': tensor 'blk.0.ffn_down.weight' is Q6_K; ztrain dequantizes F32, F16, BF16, Q8_0, "
            "Q4_0 and Q4_1");
  check_values("F32", read(*f, "f32_1d", 0, 7), files.expected("q6_k", "f32_1d"), 0);
}

TEST_CASE("gguf: read_f32's errors name the file and the tensor") {
  using namespace gguf_test;
  Files files;
  const std::string path = files / "good.gguf";
  const auto f = GgufFile::open(path);
  std::vector<float> out(200);
  const std::string unknown = error_of([&] { f->read_f32("nope", 0, 1, out.data()); });
  CHECK(unknown == "gguf '" + path + "': no tensor 'nope'");
  for (const auto& range : std::vector<std::pair<int64_t, int64_t>>{{-1, 2}, {0, 193}, {190, 3}, {5, -1}}) {
    const int64_t begin = range.first, n = range.second;
    CAPTURE(begin);
    CAPTURE(n);
    const std::string e = error_of([&] { f->read_f32("q8_0_2d", begin, n, out.data()); });
    CHECK(e.find(path) != std::string::npos);
    CHECK(e.find("tensor 'q8_0_2d'") != std::string::npos);
    CHECK(e.find("outside its 192") != std::string::npos);
  }
}

TEST_CASE("gguf: broken files fail at open with the file's name and what is wrong") {
  using namespace gguf_test;
  Files files;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad_magic.gguf", "bad magic"},
      {"bad_version.gguf", "unsupported GGUF version 4"},
      {"version1.gguf", "unsupported GGUF version 1"},
      {"huge_tensor_count.gguf", "absurd tensor count 1099511627776"},
      {"huge_string.gguf", "runs past the end of the file"},
      {"truncated_header.gguf", "truncated header"},
      {"truncated_data.gguf", "truncated: tensor 'q8_0_big'"},
      {"unknown_type.gguf", "tensor 'q8_0_2d' has unknown ggml type 99"},
      {"removed_type.gguf", "tensor 'q8_0_2d' has unknown ggml type 4"},
      {"bad_row.gguf", "tensor 'q8_0_2d' is Q8_0 with rows of 40 elements"},
      {"misaligned.gguf", "tensor 'q8_0_2d' has offset 420, not a multiple of the alignment 32"},
      {"overlap.gguf", "tensor 'q8_0_2d' has data offset 320, expected 416 (the end of 'q8_0_1d', padded to the "
                       "alignment): GGUF tensors lie one after another in the order listed, as llama.cpp requires; "
                       "this one overlaps an earlier tensor's data"},
      {"missing.gguf", "cannot open"},
  };
  for (const auto& [case_name, what] : cases) {
    const std::string name = case_name;  // a plain local: clang 14 cannot capture structured bindings
    CAPTURE(name);
    const std::string path = files / name;
    const std::string e = error_of([&] { (void)GgufFile::open(path); });
    CHECK(e.find("gguf '" + path + "'") != std::string::npos);
    CHECK_MESSAGE(e.find(what) != std::string::npos, e);
  }
}

// ---- safetensors (files/safetensors_file.hpp), against the safetensors Python package ----------
// This section's own includes, so that each format's section stands alone.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "files/safetensors_file.hpp"
#include "tests/test_util.hpp"

namespace safetensors_tests {

using zt::TensorFile;

// One tensor as the generator's manifest (<set>.txt) describes it.
struct Expected {
  std::string name, dtype, file, values;  // file and values: paths; values empty where read_f32 must refuse
  zt::Shape shape;
};

// The generator's output folder, made once per run; nullptr (and the test skipped) where ZT_PYTHON
// or ZT_TENSOR_FILES_REF is unset, as outside `meson test`.
const zt::test::TempDir* generated() {
  static std::unique_ptr<zt::test::TempDir> dir;
  const char* py = std::getenv("ZT_PYTHON");
  const char* script = std::getenv("ZT_TENSOR_FILES_REF");
  if (!py || !script) {
    MESSAGE("skipped: ZT_PYTHON and ZT_TENSOR_FILES_REF are unset (meson test sets them)");
    return nullptr;
  }
  if (!dir) {
    auto made = std::make_unique<zt::test::TempDir>();
    const auto r = zt::test::run(std::string(py) + " " + script + " safetensors " + made->path.string());
    REQUIRE_MESSAGE(r.status == 0, "make_tensor_files.py safetensors failed:\n" << r.output);
    dir = std::move(made);
  }
  return dir.get();
}

std::vector<Expected> manifest(const zt::test::TempDir& dir, const std::string& set) {
  std::ifstream in(dir / (set + ".txt"));
  REQUIRE_MESSAGE(in, "no manifest " << set << ".txt");
  std::vector<Expected> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    Expected e;
    size_t ndim = 0;
    f >> e.name >> e.dtype >> e.file >> e.values >> ndim;
    e.shape.resize(ndim);
    for (auto& d : e.shape) f >> d;
    REQUIRE_MESSAGE(!f.fail(), "bad manifest line: " << line);
    e.file = dir / e.file;
    e.values = e.values == "-" ? "" : dir / e.values;
    out.push_back(e);
  }
  return out;
}

int64_t numel(const zt::Shape& s) {
  int64_t n = 1;
  for (const int64_t d : s) n *= d;
  return n;
}

// The first element whose bits differ, or -1: the widening is exact, so NaNs must match too.
int64_t first_difference(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(got + i, want + i, sizeof(float)) != 0) return i;
  return -1;
}

void check_range(const TensorFile& f, const Expected& e, const std::vector<float>& want, int64_t begin, int64_t n) {
  std::vector<float> got(static_cast<size_t>(n) + 1, 12345.0f);  // one guard element past the range
  f.read_f32(e.name, begin, n, got.data());
  const int64_t at = first_difference(got.data(), want.data() + begin, n);
  CHECK_MESSAGE(at < 0, e.name << " [" << begin << ", " << begin + n << "): element " << begin + at << " differs");
  CHECK_MESSAGE(got.back() == 12345.0f, e.name << " [" << begin << ", " << begin + n << "): wrote past the range");
}

// Every entry as the manifest says, in its order; every readable tensor's values bit for bit, whole
// and over ranges aligned to nothing; every other dtype refused with a message naming it.
void check_set(const TensorFile& f, const std::vector<Expected>& want) {
  const auto& got = f.entries();
  REQUIRE(got.size() == want.size());
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < want.size(); ++i) {
    const Expected& e = want[i];
    INFO("tensor " << e.name);
    CHECK(got[i].name == e.name);
    CHECK(got[i].dtype == e.dtype);
    CHECK(got[i].shape == e.shape);
    CHECK(got[i].file == e.file);
    CHECK(f.find(e.name) == &got[i]);
    const int64_t n = numel(e.shape);
    if (e.values.empty()) {
      std::vector<float> out(static_cast<size_t>(n));
      try {
        f.read_f32(e.name, 0, n, out.data());
        FAIL("read_f32 of dtype " << e.dtype << " did not throw");
      } catch (const std::runtime_error& err) {
        const std::string msg = err.what();
        CHECK_MESSAGE(msg.find(e.name) != std::string::npos, msg);
        CHECK_MESSAGE(msg.find(e.dtype) != std::string::npos, msg);
        CHECK_MESSAGE(msg.find(e.file) != std::string::npos, msg);
      }
      continue;
    }
    const std::vector<float> values = zt::test::read_floats(e.values);
    REQUIRE(static_cast<int64_t>(values.size()) == n);
    check_range(f, e, values, 0, n);
    check_range(f, e, values, n, 0);
    if (n == 0) continue;
    check_range(f, e, values, n - 1, 1);
    check_range(f, e, values, n / 2 - n / 7, n / 2);  // across the middle (and the 1 MiB chunks of the big ones)
    for (int k = 0; k < 6; ++k) {
      const auto begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      const auto len = static_cast<int64_t>(rng() % static_cast<uint64_t>(n - begin + 1));
      check_range(f, e, values, begin, len);
    }
  }
  CHECK(f.find("no.such.tensor") == nullptr);
}

// The message of what `fn` throws (std::runtime_error), or a note that it threw nothing.
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

void check_says(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "'" << p << "' not in: " << msg);
}

TEST_CASE("safetensors: one file of F32, BF16, F16 and other dtypes, as the safetensors package wrote it") {
  const auto* dir = generated();
  if (!dir) return;
  const auto f = zt::open_safetensors(*dir / "single.safetensors");
  check_set(*f, manifest(*dir, "single"));
}

TEST_CASE("safetensors: a header written by hand: no metadata, unpadded, keys out of data order, F8") {
  const auto* dir = generated();
  if (!dir) return;
  const auto f = zt::open_safetensors(*dir / "handmade.safetensors");
  check_set(*f, manifest(*dir, "handmade"));
}

TEST_CASE("safetensors: a sharded set through model.safetensors.index.json") {
  const auto* dir = generated();
  if (!dir) return;
  const auto f = zt::open_safetensors(*dir / "sharded/model.safetensors.index.json");
  check_set(*f, manifest(*dir, "sharded"));
  CHECK(f->find("extra.unlisted") == nullptr);  // in shard 2 but not in the index
}

TEST_CASE("safetensors: read_f32 refuses unknown names and ranges outside the tensor") {
  const auto* dir = generated();
  if (!dir) return;
  const std::string path = *dir / "single.safetensors";
  const auto f = zt::open_safetensors(path);
  const std::string name = "model.layers.0.attn.bias";  // 101 elements
  std::vector<float> out(200);
  check_says(error_of([&] { f->read_f32("no.such.tensor", 0, 1, out.data()); }), {path, "no.such.tensor"});
  check_says(error_of([&] { f->read_f32(name, -1, 2, out.data()); }), {path, name, "outside its 101"});
  check_says(error_of([&] { f->read_f32(name, 100, 2, out.data()); }), {path, name, "[100, 102)"});
  check_says(error_of([&] { f->read_f32(name, 102, 0, out.data()); }), {path, name});
  check_says(error_of([&] { f->read_f32(name, 0, -1, out.data()); }), {path, name});
  const auto sharded = zt::open_safetensors(*dir / "sharded/model.safetensors.index.json");
  check_says(error_of([&] { sharded->read_f32("no.such.tensor", 0, 1, out.data()); }),
             {*dir / "sharded/model.safetensors.index.json", "no.such.tensor"});
}

TEST_CASE("safetensors: bad files fail at open, naming the file and the tensor") {
  const auto* dir = generated();
  if (!dir) return;
  struct Bad {
    std::string file;
    std::vector<std::string> says;  // besides the file's path
  };
  const std::vector<Bad> bad = {
      {"truncated.safetensors", {"truncated", "b.weight", "needs bytes up to"}},
      {"header_past_end.safetensors", {"header length", "past the end"}},
      {"short.safetensors", {"too short"}},
      {"bad_json.safetensors", {"not valid JSON"}},
      {"size_mismatch.safetensors", {"w.size", "F16", "needs 24"}},
      {"negative_dim.safetensors", {"w.negative", "non-negative"}},
      {"missing_field.safetensors", {"w.nooffsets", "no \"data_offsets\""}},
      {"unknown_dtype.safetensors", {"w.quant", "Q4_K"}},
      {"overlap.safetensors", {"w.second", "inside 'w.first's bytes (overlapping tensors)"}},
      {"gap.safetensors", {"w.second", "after a gap"}},
      {"deep.safetensors", {"header is not valid JSON: arrays or objects nest more than 64 deep"}},
      {"missing_shard/model.safetensors.index.json", {"model-00002-of-00002.safetensors", "b.weight", "missing"}},
      {"absent_tensor/model.safetensors.index.json", {"ghost.weight", "model-00001-of-00002.safetensors"}},
      {"no_such_file.safetensors", {"cannot open"}},
  };
  for (const auto& b : bad) {
    INFO("bad file " << b.file);
    const std::string path = *dir / ("bad/" + b.file);
    const std::string msg = error_of([&] { zt::open_safetensors(path); });
    check_says(msg, {path});
    check_says(msg, b.says);
  }
  CHECK(zt::open_safetensors(*dir / "bad/good.safetensors")->entries().size() == 2);  // the bad ones' source
}

}  // namespace safetensors_tests
